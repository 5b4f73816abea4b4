import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { corsResponseHeaders } from '../../src/transport/cors.js';

/** CORS_ORIGINS and WS_CHECK_ORIGIN as the configuration reads them (docs/api.md "CORS"). */

const base = { AUTH_JWT_SECRET: 'x'.repeat(32) };

describe('CORS configuration', () => {
  it('is off by default, takes `*` or a list of origins (case-insensitive, spaces allowed)', () => {
    expect(loadConfig(base).CORS_ORIGINS).toBeUndefined();
    expect(loadConfig({ ...base, CORS_ORIGINS: '*' }).CORS_ORIGINS).toBe('*');
    expect(loadConfig({ ...base, CORS_ORIGINS: ' https://App.example.com , http://localhost:5173' }).CORS_ORIGINS).toEqual([
      'https://app.example.com',
      'http://localhost:5173',
    ]);
  });

  it('refuses an entry that is not an origin, naming it', () => {
    for (const bad of ['https://app.example.com/', 'app.example.com', 'https://a.example.com/path', '*, https://a.example.com', 'ftp://a.example.com']) {
      expect(() => loadConfig({ ...base, CORS_ORIGINS: bad }), bad).toThrow(ConfigError);
    }
    expect(() => loadConfig({ ...base, CORS_ORIGINS: 'https://ok.example.com,nope' })).toThrow(/CORS_ORIGINS: "nope" is not an origin/);
  });

  it('WS_CHECK_ORIGIN needs CORS_ORIGINS', () => {
    expect(() => loadConfig({ ...base, WS_CHECK_ORIGIN: 'true' })).toThrow(/WS_CHECK_ORIGIN: needs CORS_ORIGINS/);
    expect(loadConfig({ ...base, WS_CHECK_ORIGIN: 'true', CORS_ORIGINS: '*' }).WS_CHECK_ORIGIN).toBe(true);
  });

  it('matches origins case-insensitively and never allows credentials', () => {
    const list = ['https://app.example.com'];
    expect(corsResponseHeaders(list, 'https://APP.example.com')['access-control-allow-origin']).toBe('https://APP.example.com');
    expect(corsResponseHeaders(list, 'https://app.example.com.evil.net')).toEqual({ vary: 'origin' });
    expect(corsResponseHeaders(undefined, 'https://app.example.com')).toEqual({});
    for (const h of [corsResponseHeaders('*', 'https://x.example'), corsResponseHeaders(list, 'https://app.example.com')]) {
      expect(h['access-control-allow-credentials']).toBeUndefined();
    }
  });
});
