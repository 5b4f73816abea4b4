import { describe, expect, it } from 'vitest';
import { displayNameFor, handleFor, MAX_DISPLAY_NAME_BYTES, truncateUtf8, userIdFromHandle } from '../../src/calls/identity.js';

/** src/calls/identity.ts: displayName (docs/protocol.md "Limits": 1 to 256 UTF-8 bytes) and the handle (docs/api.md "Caller identity and call back"). */

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('truncateUtf8', () => {
  it.each([
    ['', 10, ''],
    ['abc', 3, 'abc'],
    ['abcd', 3, 'abc'],
    ['abc', 0, ''],
    ['é', 1, ''], // 2-byte char does not fit in 1 byte
    ['aé', 2, 'a'],
    ['aé', 3, 'aé'],
    ['€', 2, ''], // 3-byte char
    ['a€', 3, 'a'],
    ['a€', 4, 'a€'],
    ['😀', 3, ''], // 4-byte char (a surrogate pair in UTF-16)
    ['a😀', 4, 'a'],
    ['a😀', 5, 'a😀'],
    ['😀😀', 7, '😀'],
  ])('truncateUtf8(%j, %i) → %j', (input, max, expected) => {
    expect(truncateUtf8(input, max)).toBe(expected);
  });

  it('always returns the longest whole-character prefix within the limit (pseudo-random strings)', () => {
    const alphabet = ['a', 'Z', ' ', 'é', 'ß', '€', '中', '😀', '👍🏽', '\u0301'];
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let i = 0; i < 500; i++) {
      const chars = Array.from({ length: rand(120) }, () => alphabet[rand(alphabet.length)]!);
      const s = chars.join('');
      const max = rand(300);
      const out = truncateUtf8(s, max);
      expect(bytes(out)).toBeLessThanOrEqual(max);
      expect(s.startsWith(out)).toBe(true);
      expect(out).not.toContain('\uFFFD');
      if (out !== s) {
        // The next code point would not have fitted.
        const next = String.fromCodePoint(s.codePointAt(out.length)!);
        expect(bytes(out) + bytes(next)).toBeGreaterThan(max);
      }
    }
  });
});

describe('displayNameFor', () => {
  it('limits to 256 bytes', () => {
    expect(MAX_DISPLAY_NAME_BYTES).toBe(256);
    expect(displayNameFor('n'.repeat(300))).toBe('n'.repeat(256));
    expect(displayNameFor('ab' + '€'.repeat(85))).toBe('ab' + '€'.repeat(84));
    expect(displayNameFor('a' + '€'.repeat(85))).toBe('a' + '€'.repeat(85));
  });

  it('trims surrounding whitespace before cutting', () => {
    expect(displayNameFor('   Alice   ')).toBe('Alice');
    expect(displayNameFor(' '.repeat(10) + 'x'.repeat(256) + ' ')).toBe('x'.repeat(256));
  });

  it('never returns an empty name (docs/protocol.md "Limits": at least 1 byte)', () => {
    expect(displayNameFor('')).toBe('?');
    expect(displayNameFor('   ')).toBe('?');
    expect(bytes(displayNameFor('😀'))).toBe(4);
  });
});

describe('handleFor / userIdFromHandle', () => {
  it('is <scheme>:<userId>', () => {
    expect(handleFor('app', 'alice')).toBe('app:alice');
    expect(handleFor('acme', 'u-123')).toBe('acme:u-123');
  });

  it('percent-encodes what a URI cannot carry, and reverses it', () => {
    const userId = 'carol smith+1@example.com/ü';
    const handle = handleFor('app', userId);
    expect(handle).toBe('app:carol%20smith%2B1%40example.com%2F%C3%BC');
    expect(userIdFromHandle('app', handle)).toBe(userId);
  });

  it('rejects another scheme or broken percent-encoding', () => {
    expect(userIdFromHandle('app', 'tel:alice')).toBeUndefined();
    expect(userIdFromHandle('app', 'application:alice')).toBeUndefined();
    expect(userIdFromHandle('app', 'app:%E0%A4%A')).toBeUndefined();
  });
});
