import { describe, expect, it } from 'vitest';
import { parseRetryAfter, reasonCode } from '../../src/push/providerResponse.js';

const NOW = Date.UTC(2025, 0, 1, 12, 0, 0);

describe('parseRetryAfter', () => {
  it('reads delay-seconds', () => {
    expect(parseRetryAfter('30', NOW)).toBe(30_000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter(['5', '9'], NOW)).toBe(5_000);
  });

  it('reads an HTTP date as the time left until it', () => {
    expect(parseRetryAfter('Wed, 01 Jan 2025 12:01:30 GMT', NOW)).toBe(90_000);
    expect(parseRetryAfter('Wed, 01 Jan 2025 11:00:00 GMT', NOW)).toBe(0);
  });

  it('ignores absent and unreadable values', () => {
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
    expect(parseRetryAfter('', NOW)).toBeUndefined();
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
    expect(parseRetryAfter('-5', NOW)).toBeUndefined();
    expect(parseRetryAfter('1.5', NOW)).toBeUndefined();
  });
});

describe('reasonCode', () => {
  it('keeps provider reason codes', () => {
    expect(reasonCode('BadDeviceToken', 400)).toBe('BadDeviceToken');
    expect(reasonCode('QUOTA_EXCEEDED', 429)).toBe('QUOTA_EXCEEDED');
  });

  it('replaces anything that is not a short code with the status', () => {
    expect(reasonCode(undefined, 502)).toBe('status 502');
    expect(reasonCode('<html>Bad gateway</html>', 502)).toBe('status 502');
    expect(reasonCode('token abc123 is invalid', 400)).toBe('status 400');
    expect(reasonCode('x'.repeat(100), 400)).toBe('status 400');
  });
});
