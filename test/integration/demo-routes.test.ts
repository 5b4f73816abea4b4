import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { api } from '../support/http.js';
import { expectProblem } from '../support/fixtures.js';

/**
 * Where the browser softphone is served (docs/development.md "Browser softphone"): nowhere by default, its
 * static files with DEMO=true, and its dev token endpoint only in dev mode (`--dev`), never with
 * NODE_ENV=production.
 */

let redis: RedisServer;
const servers: TestServer[] = [];

async function server(env: Record<string, string>, args: string[] = []): Promise<string> {
  const s = await startServer({ REDIS_URL: redis.url, ...env }, { args });
  servers.push(s);
  return s.url;
}

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await redis?.stop();
});

describe('softphone routes', () => {
  it('are absent unless DEMO=true', async () => {
    const url = await server({});
    for (const path of ['/demo/', '/demo/app.js', '/demo-api/config']) expectProblem(await api(url).get(path), 'not_found', /no route/);
  });

  it('with DEMO=true serve the page and its modules, with a restrictive CSP, and no token endpoint without --dev', async () => {
    const url = await server({ DEMO: 'true' });
    const page = await api(url).get('/demo/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'self'/);
    // No SFU configured: the page connects to this server only (its own WebSocket included).
    expect(page.headers.get('content-security-policy')).toMatch(/connect-src 'self';/);
    expect(page.text).toContain('<script type="module" src="/demo/app.js">');
    for (const file of ['app.js', 'api.js', 'media.js', 'group.js', 'groupMedia.js']) {
      const js = await api(url).get(`/demo/${file}`);
      expect(js.status, file).toBe(200);
      expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    }
    expect((await api(url).get('/demo/style.css')).headers.get('content-type')).toMatch(/^text\/css/);
    expect((await api(url).get('/demo/nothing.js')).status).toBe(404);
    const redirect = await fetch(`${url}/demo`, { redirect: 'manual' });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('/demo/');
    expect((await api(url).get('/demo-api/config')).json).toEqual({ devTokens: false });
    expectProblem(await api(url).post('/demo-api/token', { userId: 'mallory' }), 'not_found', /no route/);
  });

  it('in dev mode sign dev tokens the API accepts; with NODE_ENV=production --dev is ignored', async () => {
    const url = await server({ DEMO: 'true' }, ['--dev']);
    expect((await api(url).get('/demo-api/config')).json).toEqual({ devTokens: true });
    const minted = await api(url).post('/demo-api/token', { userId: 'carol', name: 'Carol', installationId: 'carol-web-1' });
    expect(minted.status, minted.text).toBe(200);
    expect(minted.json).toMatchObject({ userId: 'carol', installationId: 'carol-web-1' });
    const events = await api(url, minted.json.token as string).get('/v1/call-events');
    expect(events.status, events.text).toBe(200);
    expectProblem(await api(url).post('/demo-api/token', { userId: 'bad{id}' }), 'invalid_request', /userId/);

    const prod = await server({ DEMO: 'true', NODE_ENV: 'production' }, ['--dev']);
    expect((await api(prod).get('/demo-api/config')).json).toEqual({ devTokens: false });
    expectProblem(await api(prod).post('/demo-api/token', { userId: 'carol' }), 'not_found', /no route/);
  });
});
