import { describe, expect, it } from 'vitest';
import { callShardTag, keys, shardOf } from '../../src/redis/keys.js';

/** src/redis/keys.ts: key names, shard tags, and the hash-tag rule that keeps scripts cluster-safe. */

const ks = { prefix: 'cb', shards: 8 };
const tagOf = (key: string) => /\{[^}]*\}/.exec(key)?.[0];

describe('shardOf', () => {
  it('is 32-bit FNV-1a (standard test vectors) modulo the shard count', () => {
    // FNV-1a("") = 0x811c9dc5, ("a") = 0xe40c292c, ("foobar") = 0xbf9cf968.
    expect(shardOf('', 1000)).toBe(0x811c9dc5 % 1000);
    expect(shardOf('a', 1000)).toBe(0xe40c292c % 1000);
    expect(shardOf('foobar', 1000)).toBe(0xbf9cf968 % 1000);
    expect(shardOf('foobar', 1024)).toBe(0xbf9cf968 % 1024);
  });

  it('stays within [0, shards) and one shard means shard 0', () => {
    for (let i = 0; i < 200; i++) {
      const id = `call-${i}`;
      expect(shardOf(id, 1)).toBe(0);
      const s = shardOf(id, 7);
      expect(Number.isInteger(s) && s >= 0 && s < 7).toBe(true);
    }
  });

  it('spreads UUID-like call IDs evenly', () => {
    const counts = new Array<number>(8).fill(0);
    for (let i = 0; i < 8000; i++) counts[shardOf(`${i.toString(16).padStart(8, '0')}-4b1c-9e7d-${i * 7919}`, 8)]!++;
    for (const c of counts) {
      expect(c).toBeGreaterThan(800);
      expect(c).toBeLessThan(1200);
    }
  });
});

describe('keys', () => {
  it('spells every key exactly', () => {
    const tag = callShardTag(ks, 'call-1');
    expect(tag).toBe(`{c${shardOf('call-1', 8)}}`);
    expect(keys.call(ks, 'call-1')).toBe(`cb:${tag}:call:call-1`);
    expect(keys.operation(ks, 'call-1', 'alice', 'op-1')).toBe(`cb:${tag}:op:5:alice:op-1`);
    expect(keys.outboxForCall(ks, 'call-1')).toBe(`cb:${tag}:outbox`);
    expect(keys.outboxForShard(ks, 3)).toBe('cb:{c3}:outbox');
    expect(keys.operationBinding(ks, 'alice', 'op-1')).toBe('cb:{u:alice}:opb:op-1');
    expect(keys.pushRegistrations(ks, 'alice')).toBe('cb:{u:alice}:push');
    expect(keys.pushTokenOwner(ks, 'androidPush', 'h4sh')).toBe('cb:tok:androidPush:h4sh');
    expect(keys.eventLog(ks, 'alice')).toBe('cb:{u:alice}:log');
    expect(keys.eventLogMeta(ks, 'alice')).toBe('cb:{u:alice}:logmeta');
    expect(keys.liveChannel(ks, 'alice')).toBe('cb:{u:alice}:live');
  });

  it('uses the configured prefix', () => {
    expect(keys.call({ prefix: 'other', shards: 8 }, 'x')).toMatch(/^other:\{c\d\}:call:x$/);
  });

  it('all keys of one call script share one hash tag, the outbox of the call’s shard', () => {
    for (const callId of ['a', 'call-1', '6f1c2c1e-1d7a-4c69-9a52-0f1a7e9b1c11', 'x'.repeat(128)]) {
      const tag = tagOf(keys.call(ks, callId));
      expect(tagOf(keys.operation(ks, callId, 'u', 'op'))).toBe(tag);
      expect(tagOf(keys.outboxForCall(ks, callId))).toBe(tag);
      expect(keys.outboxForCall(ks, callId)).toBe(keys.outboxForShard(ks, shardOf(callId, ks.shards)));
    }
  });

  it('all keys of one user share the {u:<userId>} tag', () => {
    for (const k of [keys.operationBinding(ks, 'bob', 'op'), keys.pushRegistrations(ks, 'bob'), keys.eventLog(ks, 'bob'), keys.eventLogMeta(ks, 'bob')]) {
      expect(tagOf(k)).toBe('{u:bob}');
    }
  });

  it('operation keys cannot collide across users and operationIds containing ":"', () => {
    expect(keys.operation(ks, 'c', 'a:b', 'c')).not.toBe(keys.operation(ks, 'c', 'a', 'b:c'));
  });
});
