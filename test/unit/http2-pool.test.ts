import { sleep } from '../support/wait.js';
import { within } from '../support/wait.js';
import http2, { type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Http2Pool, Http2RequestError } from '../../src/push/http2Pool.js';

/** Local h2c servers on port 0; each test decides how its server answers. */

type Handler = (stream: ServerHttp2Stream, headers: http2.IncomingHttpHeaders, session: ServerHttp2Session) => void;

interface TestServer {
  url: string;
  sessions: ServerHttp2Session[];
  close(): Promise<void>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function startServer(handler: Handler): Promise<TestServer> {
  const server: Http2Server = http2.createServer();
  const sessions: ServerHttp2Session[] = [];
  server.on('session', (s) => {
    sessions.push(s);
    s.on('error', () => {});
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    let body = '';
    stream.setEncoding('utf8');
    stream.on('data', (c: string) => (body += c));
    stream.on('end', () => {
      (stream as ServerHttp2Stream & { body?: string }).body = body;
      handler(stream, headers, stream.session as ServerHttp2Session);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = () =>
    new Promise<void>((resolve) => {
      for (const s of sessions) if (!s.destroyed) s.destroy();
      server.close(() => resolve());
    });
  cleanups.push(close);
  return { url: `http://127.0.0.1:${port}`, sessions, close };
}

function newPool(): Http2Pool {
  const pool = new Http2Pool();
  cleanups.push(() => pool.close());
  return pool;
}

const echo: Handler = (stream, headers) => {
  stream.respond({ ':status': 200, 'x-path': String(headers[':path']) });
  stream.end(JSON.stringify({ method: headers[':method'], body: (stream as ServerHttp2Stream & { body?: string }).body }));
};

describe('Http2Pool', () => {
  it('sends method, path, headers and body and returns status, headers and body', async () => {
    const server = await startServer((stream, headers) => {
      stream.respond({ ':status': 201, 'x-seen': String(headers['x-test']) });
      stream.end(`${headers[':method']} ${headers[':path']} ${(stream as ServerHttp2Stream & { body?: string }).body}`);
    });
    const pool = newPool();
    const res = await pool.request(server.url, { method: 'POST', path: '/a/b', headers: { 'x-test': 'yes' }, body: 'hello' }, 2000);
    expect(res.status).toBe(201);
    expect(res.headers['x-seen']).toBe('yes');
    expect(res.headers[':status']).toBeUndefined();
    expect(res.body).toBe('POST /a/b hello');
  });

  it('reuses one session per origin across sequential and concurrent requests', async () => {
    const server = await startServer(echo);
    const pool = newPool();
    for (let i = 0; i < 5; i++) await pool.request(server.url, { method: 'GET', path: `/${i}` }, 2000);
    await Promise.all(Array.from({ length: 50 }, (_, i) => pool.request(`${server.url}/ignored`, { method: 'GET', path: `/c${i}` }, 2000)));
    expect(pool.sessionsCreated).toBe(1);
    expect(server.sessions).toHaveLength(1);
  });

  it.each([
    ['the server sends GOAWAY', (session: ServerHttp2Session) => session.goaway()],
    ['the connection drops', (session: ServerHttp2Session) => session.destroy()],
  ])('opens a new session after %s', async (_, cut) => {
    const server = await startServer(echo);
    const pool = newPool();
    await pool.request(server.url, { method: 'GET', path: '/1' }, 2000);
    cut(server.sessions[0]!);
    await sleep(50);
    const res = await pool.request(server.url, { method: 'GET', path: '/2' }, 2000);
    expect(res.status).toBe(200);
    expect(pool.sessionsCreated).toBe(2);
  });

  it('fails a request whose connection drops mid-request, then recovers', async () => {
    let first = true;
    const server = await startServer((stream, headers, session) => {
      if (first) {
        first = false;
        session.destroy();
        return;
      }
      echo(stream, headers, session);
    });
    const pool = newPool();
    const err = await pool.request(server.url, { method: 'GET', path: '/device/secret-token' }, 2000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Http2RequestError);
    expect((err as Http2RequestError).kind).toBe('network');
    expect((err as Error).message).not.toContain('secret-token');
    expect((await pool.request(server.url, { method: 'GET', path: '/2' }, 2000)).status).toBe(200);
  });

  it('times out a request the server never answers, and the session stays usable', async () => {
    const server = await startServer((stream, headers, session) => {
      if (headers[':path'] === '/slow') return; // never answers
      echo(stream, headers, session);
    });
    const pool = newPool();
    const err = await within(1000, 'the request timeout', pool.request(server.url, { method: 'GET', path: '/slow' }, 150).catch((e: unknown) => e));
    expect(err).toBeInstanceOf(Http2RequestError);
    expect((err as Http2RequestError).kind).toBe('timeout');
    // The PING after the timeout is answered, so the session is kept.
    await sleep(100);
    expect((await pool.request(server.url, { method: 'GET', path: '/fast' }, 2000)).status).toBe(200);
    expect(pool.sessionsCreated).toBe(1);
  });

  it('reports a refused connection as a network error', async () => {
    const server = await startServer(echo);
    await server.close();
    const pool = newPool();
    const err = await pool.request(server.url, { method: 'GET', path: '/' }, 2000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Http2RequestError);
    expect((err as Http2RequestError).kind).toBe('network');
    expect((err as Http2RequestError).code).toBe('ECONNREFUSED');
  });

  it('refuses answers larger than maxResponseBytes', async () => {
    const server = await startServer((stream) => {
      stream.respond({ ':status': 200 });
      stream.end('x'.repeat(10_000));
    });
    const pool = new Http2Pool({ maxResponseBytes: 1000 });
    cleanups.push(() => pool.close());
    const err = await pool.request(server.url, { method: 'GET', path: '/' }, 2000).catch((e: unknown) => e);
    expect((err as Http2RequestError).kind).toBe('responseTooLarge');
  });

  it('close() closes the sessions and refuses later requests', async () => {
    const server = await startServer(echo);
    const pool = new Http2Pool();
    await pool.request(server.url, { method: 'GET', path: '/' }, 2000);
    expect(pool.openSessions).toBe(1);
    await pool.close();
    expect(pool.openSessions).toBe(0);
    const err = await pool.request(server.url, { method: 'GET', path: '/' }, 2000).catch((e: unknown) => e);
    expect((err as Http2RequestError).kind).toBe('closed');
  });

  it('close() is bounded: a request the peer never answers does not hold it past the grace period', async () => {
    const server = await startServer(() => {});
    const pool = new Http2Pool();
    const pending = pool.request(server.url, { method: 'GET', path: '/hang' }, 10_000).catch((e: unknown) => e);
    await sleep(50);
    await within(1_000, 'close() with a 100 ms grace', pool.close(100));
    expect(await pending).toBeInstanceOf(Http2RequestError);
  });

  it('rejects origins that are not http or https', async () => {
    const pool = newPool();
    await expect(pool.request('ftp://example.test', { method: 'GET', path: '/' }, 100)).rejects.toThrow(TypeError);
  });
});
