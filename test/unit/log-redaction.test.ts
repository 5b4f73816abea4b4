import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, redacted, REDACTED_KEYS } from '../../src/util/logger.js';

/** The lines a real logger writes, parsed. */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: createLogger('info', stream) };
}

describe('log redaction (the safety net for a secret that slips into a log line)', () => {
  it('censors every listed key at the top of the line and one level down, and nothing else', () => {
    const { lines, logger } = capture();
    for (const key of REDACTED_KEYS) {
      logger.info({ [key]: 'top-secret', callId: 'c1', nested: { [key]: 'deep-secret', keep: 'visible' } }, 'line');
    }
    expect(lines).toHaveLength(REDACTED_KEYS.size);
    for (const [i, key] of [...REDACTED_KEYS].entries()) {
      const line = lines[i]!;
      expect(line[key]).toBe('[redacted]');
      expect(line.callId).toBe('c1');
      expect(line.nested).toEqual({ [key]: '[redacted]', keep: 'visible' });
    }
    expect(JSON.stringify(lines)).not.toMatch(/top-secret|deep-secret/);
  });

  it("never changes the caller's objects, and returns a line without such keys as it is", () => {
    const nested = { token: 'abc', keep: 1 };
    const obj = { authorization: 'Bearer x', nested };
    const out = redacted(obj);
    expect(out).toEqual({ authorization: '[redacted]', nested: { token: '[redacted]', keep: 1 } });
    expect(obj).toEqual({ authorization: 'Bearer x', nested: { token: 'abc', keep: 1 } });
    expect(nested.token).toBe('abc');
    const clean = { callId: 'c1', state: 'ringing', revision: 2, inner: { shard: 3 } };
    expect(redacted(clean)).toBe(clean);
  });

  it('an error with a secret property keeps its type, message and stack', () => {
    const { lines, logger } = capture();
    const err = Object.assign(new Error('provider refused'), { token: 'device-token' });
    logger.warn({ err }, 'push failed');
    const logged = lines[0]!.err as Record<string, unknown>;
    expect(logged.token).toBe('[redacted]');
    expect(logged.type).toBe('Error');
    expect(logged.message).toBe('provider refused');
    expect(String(logged.stack)).toContain('provider refused');
    expect(err.token).toBe('device-token');
  });
});
