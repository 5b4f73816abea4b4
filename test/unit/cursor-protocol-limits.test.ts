import { afterEach, describe, expect, it, vi } from 'vitest';
import { pack, unpack } from 'msgpackr';
import { compareStreamIds, decodeCursor, encodeCursor } from '../../src/events/cursor.js';
import { parseLiveMessage } from '../../src/events/eventLog.js';
import { decodeClientFrame, encodeEventFrame, encodeReplyFrame, negotiate } from '../../src/gateway/protocol.js';
import { FailureCounter, TokenBucket } from '../../src/limits/rateLimiter.js';
import { checkToken } from '../../src/auth/guard.js';
import { createTokenVerifier } from '../../src/auth/verifier.js';
import { hmacJwt, TEST_JWT_SECRET, tokenFor } from '../support/tokens.js';

describe('cursors', () => {
  it('round-trip and reject anything else', () => {
    expect(decodeCursor(encodeCursor({ epoch: 'abc123', id: '17-3' }))).toEqual({ epoch: 'abc123', id: '17-3' });
    for (const bad of ['', 'abc', 'ABC_1-0', 'abc_1', 'abc_1-0-0', 'a b_1-0']) expect(decodeCursor(bad)).toBeUndefined();
  });
  it('stream IDs compare by milliseconds, then sequence', () => {
    expect(compareStreamIds('10-0', '9-5')).toBeGreaterThan(0);
    expect(compareStreamIds('10-1', '10-2')).toBeLessThan(0);
    expect(compareStreamIds('10-2', '10-2')).toBe(0);
  });
  it('live messages parse with payloads that contain newlines', () => {
    expect(parseLiveMessage('e\n1-0\n2-0\n\nphone\n{"a":"x\\ny"}\nmore')).toEqual({
      epoch: 'e', previousId: '1-0', id: '2-0', only: '', except: 'phone', json: '{"a":"x\\ny"}\nmore',
    });
    expect(parseLiveMessage('e\n1-0\n2-0')).toBeUndefined();
  });
});

describe('signaling protocol', () => {
  it('negotiates msgpack, json, or none', () => {
    expect(negotiate('calling.v1.msgpack, calling.v1.json')).toEqual({ encoding: 'msgpack', protocol: 'calling.v1.msgpack' });
    expect(negotiate('calling.v1.json')).toEqual({ encoding: 'json', protocol: 'calling.v1.json' });
    expect(negotiate('')).toEqual({ encoding: 'json', protocol: '' });
  });
  it('JSON and msgpack event frames carry the same event', () => {
    const payload = '{"schemaVersion":1,"type":"call.ended","reason":"declined","occurredAtMs":1795236718009}';
    const json = JSON.parse(encodeEventFrame('json', 'e_1-0', payload) as string);
    const packed = unpack(encodeEventFrame('msgpack', 'e_1-0', payload) as Uint8Array);
    expect(packed).toEqual(json);
    expect(json.event.occurredAtMs).toBe(1795236718009);
  });
  it('client frames decode to objects in either encoding; anything else is not a frame', () => {
    const enc = (s: string) => new TextEncoder().encode(s).buffer as ArrayBuffer;
    expect(decodeClientFrame('json', enc('{"type":"ping"}'), false)).toEqual({ type: 'ping' });
    expect(decodeClientFrame('json', enc('not json'), false)).toBeUndefined();
    expect(decodeClientFrame('json', enc('[1]'), false)).toBeUndefined();
    expect(decodeClientFrame('json', enc('null'), false)).toBeUndefined();
    const answer = { type: 'answer', callId: 'c-1', operationId: 'op-1', installationId: 'phone' };
    const packed = pack(answer);
    expect(decodeClientFrame('msgpack', packed.buffer.slice(packed.byteOffset, packed.byteOffset + packed.byteLength) as ArrayBuffer, true)).toEqual(answer);
  });
  it('reply frames carry the route\'s status and body, the same in JSON and msgpack', () => {
    const body = '{"code":"rate_limited","status":429}';
    const json = encodeReplyFrame('json', 'op-1', 429, body, 3) as string;
    expect(JSON.parse(json)).toEqual({ type: 'reply', operationId: 'op-1', status: 429, body: { code: 'rate_limited', status: 429 }, retryAfterS: 3 });
    expect(unpack(encodeReplyFrame('msgpack', 'op-1', 429, body, 3) as Uint8Array)).toEqual(JSON.parse(json));
    expect(JSON.parse(encodeReplyFrame('json', undefined, 400, '{}', undefined) as string)).toEqual({ type: 'reply', status: 400, body: {} });
  });
});

describe('in-memory limits', () => {
  it('token bucket allows the burst, then refills evenly', () => {
    const b = new TokenBucket({ limit: 3, windowMs: 3000 }, 0);
    expect([b.take(0), b.take(0), b.take(0)].every((d) => d.allowed)).toBe(true);
    const refused = b.take(0);
    expect(refused).toEqual({ allowed: false, retryAfterMs: 1000 });
    expect(b.take(1000).allowed).toBe(true);
  });
  it('failure counter blocks after the limit until the window resets', () => {
    const f = new FailureCounter({ limit: 2, windowMs: 1000 });
    expect(f.blocked('ip', 0).allowed).toBe(true);
    f.fail('ip', 0);
    f.fail('ip', 10);
    expect(f.blocked('ip', 20)).toEqual({ allowed: false, retryAfterMs: 980 });
    expect(f.blocked('other', 20).allowed).toBe(true);
    expect(f.blocked('ip', 1000).allowed).toBe(true);
  });
  it('failure counter says whether any address may be blocked: from its limit until that window ends', () => {
    const f = new FailureCounter({ limit: 2, windowMs: 1000 });
    f.fail('a', 0);
    expect(f.anyBlocked(5)).toBe(false);
    f.fail('a', 10);
    expect(f.anyBlocked(20)).toBe(true);
    f.fail('b', 500);
    f.fail('b', 600);
    expect(f.anyBlocked(1200)).toBe(true);
    expect(f.anyBlocked(1500)).toBe(false);
  });
  it('token checks read the client address only while an address is over the limit, or to count a failure', async () => {
    const guard = { verify: createTokenVerifier({ secret: TEST_JWT_SECRET }), failures: new FailureCounter({ limit: 2, windowMs: 60_000 }) };
    let reads = 0;
    const address = () => {
      reads++;
      return '192.0.2.1';
    };
    const good = tokenFor({ userId: 'u', installationId: 'i' });
    expect((await checkToken(guard, good, address)).ok).toBe(true);
    expect(reads).toBe(0);
    expect(await checkToken(guard, 'not-a-token', address)).toMatchObject({ ok: false, kind: 'unauthorized' });
    expect(reads).toBe(1);
    await checkToken(guard, 'not-a-token', address);
    // Now over the limit: even a valid token from that address is refused, after reading it.
    expect(await checkToken(guard, good, address)).toMatchObject({ ok: false, kind: 'rate_limited' });
    expect(reads).toBe(3);
    // An address that can no longer be read (the response is gone) is neither counted nor refused.
    expect((await checkToken(guard, good, () => undefined)).ok).toBe(true);
  });
  describe('the verifier\'s cache of verified tokens', () => {
    afterEach(() => vi.useRealTimers());
    const claims = (expSec: number) => ({ sub: 'u', iid: 'i', exp: expSec });

    it('serves a token again until its exp, then refuses it as expired', () => {
      vi.useFakeTimers({ now: 1_000_000_000_000, toFake: ['Date'] });
      const verify = createTokenVerifier({ secret: TEST_JWT_SECRET });
      const token = hmacJwt('HS256', TEST_JWT_SECRET, claims(1_000_000_010));
      const first = verify(token);
      expect(first).toMatchObject({ userId: 'u', installationId: 'i', expiresAtMs: 1_000_000_010_000 });
      vi.setSystemTime(1_000_000_009_999);
      // The same principal object: served from the cache, not verified again.
      expect(verify(token)).toBe(first);
      vi.setSystemTime(1_000_000_010_001);
      expect(() => verify(token)).toThrow('token expired');
    });

    it('keeps no refused token: one not active yet is accepted once its nbf has passed; a principal it serves cannot be changed', () => {
      vi.useFakeTimers({ now: 1_000_000_000_000, toFake: ['Date'] });
      const verify = createTokenVerifier({ secret: TEST_JWT_SECRET });
      const early = hmacJwt('HS256', TEST_JWT_SECRET, { ...claims(1_000_000_060), nbf: 1_000_000_005 });
      expect(() => verify(early)).toThrow('token is not active yet');
      vi.setSystemTime(1_000_000_006_000);
      const p = verify(early);
      expect(p).toMatchObject({ userId: 'u', installationId: 'i' });
      expect(() => Object.assign(p, { userId: 'someone-else' })).toThrow(TypeError);
    });
  });
});
