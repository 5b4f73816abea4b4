import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { device } from '../support/fixtures.js';

/**
 * CORS (docs/api.md "CORS"): with CORS_ORIGINS set, a preflight answers 204 with the path's methods,
 * the allowed request headers and a max-age; every response, errors included, carries
 * access-control-allow-origin and exposes retry-after and x-request-id; credentials are never
 * allowed. WS_CHECK_ORIGIN refuses a signaling upgrade from an unlisted browser origin.
 */

const APP = 'https://app.example.com';
const DEV = 'http://localhost:5173';
const OTHER = 'https://evil.example.net';

let stack: Stack;
let listed: TestServer;
let star: TestServer;
let off: TestServer;

beforeAll(async () => {
  stack = await startStack({ CORS_ORIGINS: `${APP}, ${DEV}`, WS_CHECK_ORIGIN: 'true' });
  listed = stack.servers[0]!;
  star = await stack.addServer({ CORS_ORIGINS: '*', ROLES: 'api' });
  off = await stack.addServer({ ROLES: 'api' });
});

afterAll(async () => {
  await stack?.stop();
});

function preflight(base: string, path: string, origin: string | undefined, method = 'POST'): Promise<Response> {
  return fetch(base + path, {
    method: 'OPTIONS',
    headers: {
      ...(origin ? { origin } : {}),
      'access-control-request-method': method,
      'access-control-request-headers': 'authorization, content-type',
    },
  });
}

function expectNoCors(res: Response): void {
  for (const h of ['access-control-allow-origin', 'access-control-allow-methods', 'access-control-expose-headers']) expect(res.headers.get(h), h).toBeNull();
  expect(res.headers.get('access-control-allow-credentials')).toBeNull();
}

function expectReadable(res: Response, origin: string): void {
  expect(res.headers.get('access-control-allow-origin')).toBe(origin);
  const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(',').map((h) => h.trim());
  expect(exposed).toEqual(expect.arrayContaining(['retry-after', 'x-request-id']));
  expect(res.headers.get('access-control-allow-credentials')).toBeNull();
}

describe('CORS_ORIGINS as a list', () => {
  it('a preflight from a listed origin gets 204 with methods, headers and max-age', async () => {
    for (const origin of [APP, DEV]) {
      const res = await preflight(listed.url, '/v1/calls', origin);
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
      expect(res.headers.get('access-control-allow-origin')).toBe(origin);
      // /v1/calls: create (POST) and the history (GET).
      expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST');
      expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-request-id');
      expect(res.headers.get('access-control-max-age')).toBe('600');
      expect(res.headers.get('vary')).toBe('origin');
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    }
    const withParam = await preflight(listed.url, '/v1/installations/i-1/push-tokens/iosVoip', APP, 'PUT');
    expect(withParam.status).toBe(204);
    expect(withParam.headers.get('access-control-allow-methods')).toBe('PUT, DELETE');
    const events = await preflight(listed.url, '/v1/call-events', APP, 'GET');
    expect(events.headers.get('access-control-allow-methods')).toBe('GET');
  });

  it('a preflight from another origin, or without one, is refused with a problem and no CORS headers', async () => {
    for (const origin of [OTHER, undefined, 'https://app.example.com.evil.net']) {
      const res = await preflight(listed.url, '/v1/calls', origin);
      expect(res.status, String(origin)).toBe(403);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(((await res.json()) as { code: string }).code).toBe('forbidden');
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    }
  });

  it('successful and error responses carry the origin and expose retry-after and x-request-id', async () => {
    const d = device(listed.url);
    const ok = await fetch(`${listed.url}/v1/call-events`, { headers: { origin: APP, authorization: `Bearer ${d.token}` } });
    expect(ok.status).toBe(200);
    expectReadable(ok, APP);
    expect(ok.headers.get('x-request-id')).toMatch(/./);

    const unauthorized = await fetch(`${listed.url}/v1/calls`, { method: 'POST', headers: { origin: DEV, 'content-type': 'application/json' }, body: '{}' });
    expect(unauthorized.status).toBe(401);
    expectReadable(unauthorized, DEV);

    const notFound = await fetch(`${listed.url}/v1/nothing-here`, { headers: { origin: APP } });
    expect(notFound.status).toBe(404);
    expectReadable(notFound, APP);

    const wrongMethod = await fetch(`${listed.url}/v1/call-events`, { method: 'DELETE', headers: { origin: APP } });
    expect(wrongMethod.status).toBe(405);
    expectReadable(wrongMethod, APP);
  });

  it('a response to an unlisted origin, or to a request without Origin, allows no origin', async () => {
    const d = device(listed.url);
    const other = await fetch(`${listed.url}/v1/call-events`, { headers: { origin: OTHER, authorization: `Bearer ${d.token}` } });
    expect(other.status).toBe(200);
    expectNoCors(other);
    expect(other.headers.get('vary')).toBe('origin');
    const none = await fetch(`${listed.url}/v1/call-events`, { headers: { authorization: `Bearer ${d.token}` } });
    expect(none.status).toBe(200);
    expectNoCors(none);
  });
});

describe('CORS_ORIGINS=*', () => {
  it('allows any origin with `*`, never with credentials', async () => {
    const pre = await preflight(star.url, '/v1/calls/abc/answer', OTHER);
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-methods')).toBe('POST');
    expect(pre.headers.get('vary')).toBeNull();
    expect(pre.headers.get('access-control-allow-credentials')).toBeNull();
    const res = await fetch(`${star.url}/v1/calls/abc`, { headers: { origin: OTHER } });
    expect(res.status).toBe(401);
    expectReadable(res, '*');
  });
});

describe('without CORS_ORIGINS', () => {
  it('OPTIONS is a method the path does not allow, and no response carries CORS headers', async () => {
    const pre = await preflight(off.url, '/v1/calls', APP);
    expect(pre.status).toBe(405);
    expect(pre.headers.get('allow')).toBe('GET, POST');
    expectNoCors(pre);
    const res = await fetch(`${off.url}/v1/calls/abc`, { headers: { origin: APP } });
    expect(res.status).toBe(401);
    expectNoCors(res);
  });
});

describe('WS_CHECK_ORIGIN', () => {
  /** Opens a signaling socket; resolves with 'open' or the refused upgrade's HTTP status. */
  function upgrade(origin: string | undefined): Promise<'open' | number> {
    const d = device(listed.url);
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${listed.url.replace(/^http/, 'ws')}/v1/signaling`, 'calling.v1.json', {
        headers: { authorization: `Bearer ${d.token}` },
        ...(origin ? { origin } : {}),
      });
      ws.on('open', () => {
        ws.close();
        resolve('open');
      });
      ws.on('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0);
        ws.terminate();
      });
      ws.on('error', reject);
    });
  }

  it('refuses an unlisted browser origin with 403; a listed origin and a native client (no Origin) connect', async () => {
    expect(await upgrade(OTHER)).toBe(403);
    expect(await upgrade(APP)).toBe('open');
    expect(await upgrade(undefined)).toBe('open');
  });
});
