import { describe, expect, it } from 'vitest';
import { parseMonitorLine } from '../support/command-monitor.js';

/** MONITOR's line format, as Redis 7 writes it (the command budget counts from it). */
describe('parseMonitorLine', () => {
  it('reads a client command: time, address, name (lower case) and arguments', () => {
    expect(parseMonitorLine('1795673712.404188 [0 127.0.0.1:37110] "EVALSHA" "6c4c" "1" "cb:{c5}:outbox"')).toEqual({
      atUs: 1795673712 * 1e6 + 404188,
      client: '127.0.0.1:37110',
      name: 'evalsha',
      args: ['6c4c', '1', 'cb:{c5}:outbox'],
    });
  });

  it('reads a command a script ran, and the escapes Redis writes', () => {
    const c = parseMonitorLine('1795673712.358952 [0 lua] "SPUBLISH" "cb:{u:a}:live" "!early\\n\\n\\"x\\"\\\\\\x00\\xff"');
    expect(c?.client).toBe('lua');
    expect(c?.args).toEqual(['cb:{u:a}:live', '!early\n\n"x"\\\x00\xff']);
  });

  it('is undefined for anything else', () => {
    expect(parseMonitorLine('OK')).toBeUndefined();
    expect(parseMonitorLine('1795673712.358952 [0 lua] HSET')).toBeUndefined();
  });
});
