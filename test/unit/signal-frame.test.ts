import { describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';
import { checkSignalFrame } from '../../src/gateway/signals.js';
import { SIGNAL_CUSTOM_MAX_BYTES } from '../../src/config/signalLimits.js';

/** A `signal` frame's check (docs/signaling.md "Live signals"), done by hand on every signal. */
describe('checkSignalFrame', () => {
  it('takes each kind with its value, and gives the value as JSON', () => {
    expect(checkSignalFrame({ callId: 'c-1', kind: 'muted', value: true })).toEqual({ signal: { callId: 'c-1', kind: 'muted', value: true }, valueJson: 'true' });
    expect(checkSignalFrame({ callId: 'c-1', kind: 'video', value: false })).toEqual({ signal: { callId: 'c-1', kind: 'video', value: false }, valueJson: 'false' });
    expect(checkSignalFrame({ callId: 'c-1', kind: 'reaction', value: '👍' })).toMatchObject({ valueJson: '"👍"' });
    const custom = { slide: 3, note: 'é"\n' };
    expect(checkSignalFrame({ callId: 'c-1', kind: 'custom', value: custom })).toMatchObject({ valueJson: JSON.stringify(custom) });
    expect(checkSignalFrame({ callId: 'c-1', kind: 'custom', value: null })).toMatchObject({ valueJson: 'null' });
  });

  it('says what is wrong with a frame it refuses', () => {
    const problem = (frame: Record<string, unknown>) => {
      const checked = checkSignalFrame(frame);
      return 'problem' in checked ? checked.problem : undefined;
    };
    expect(problem({ kind: 'muted', value: true })).toMatch(/^callId: /);
    expect(problem({ callId: 'has space', kind: 'muted', value: true })).toMatch(/^callId: /);
    expect(problem({ callId: 'x'.repeat(129), kind: 'muted', value: true })).toMatch(/^callId: /);
    expect(problem({ callId: 'c-1', kind: 'muted', value: 'yes' })).toMatch(/^value: /);
    expect(problem({ callId: 'c-1', kind: 'reaction', value: '' })).toMatch(/^value: /);
    expect(problem({ callId: 'c-1', kind: 'reaction', value: 'x'.repeat(33) })).toMatch(/^value: /);
    expect(problem({ callId: 'c-1', kind: 'custom' })).toMatch(/^value: /);
    expect(problem({ callId: 'c-1', kind: 'custom', value: 'x'.repeat(SIGNAL_CUSTOM_MAX_BYTES) })).toMatch(/^value: /);
    expect(problem({ callId: 'c-1', kind: 'custom', value: 'x'.repeat(SIGNAL_CUSTOM_MAX_BYTES - 2) })).toBeUndefined();
    expect(problem({ callId: 'c-1', kind: 'wave', value: true })).toMatch(/^kind: /);
    expect(problem({ callId: 'c-1', kind: 'toString', value: true })).toMatch(/^kind: /);
  });

  it('refuses a MessagePack frame whose custom value has no JSON (a 64-bit integer decodes as a BigInt)', () => {
    const packr = new Packr({ useRecords: false, mapsAsObjects: true });
    const frame = packr.unpack(packr.pack({ type: 'signal', callId: 'c-1', kind: 'custom', value: { n: 2n ** 60n } })) as Record<string, unknown>;
    expect(typeof (frame.value as { n: unknown }).n).toBe('bigint');
    expect(checkSignalFrame(frame)).toEqual({ problem: `value: a JSON value of at most ${SIGNAL_CUSTOM_MAX_BYTES} bytes` });
  });
});
