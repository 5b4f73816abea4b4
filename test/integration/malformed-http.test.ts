import { connect as tcpConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { device } from '../support/fixtures.js';
import { api } from '../support/http.js';

/**
 * Requests uWebSockets.js's HTTP parser refuses (docs/operations.md "Malformed HTTP"): depending on
 * the build, it closes the connection (some without any answer, some after its idle timeout) or
 * answers with a status of its own. None may hurt the server: right after each, a normal request
 * is answered and /readyz says ready. None may get a 5xx, but for the one the table documents: the
 * newer build's parser answers a raw space in the target with 505 before any route sees it. A
 * reverse proxy in front (deploy/haproxy/haproxy.cfg) answers these itself with a 4xx.
 */

/** A status a build's own parser gives a case, documented in docs/operations.md "Malformed HTTP". */
const PARSER_STATUS: Record<string, Record<string, number>> = {
  '@btc-vision/uwebsockets.js@20.57.0': { 'a raw space in the target': 505 },
};
let build = '';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
  build = /"uws":"([^"]+)"/.exec(stack.servers[0]!.logs())?.[1] ?? '';
});
afterAll(() => stack?.stop());

interface Outcome {
  /** The status line's code, if the server answered before closing. */
  status: number | undefined;
  closedAfterMs: number;
}

/** Sends raw bytes and waits for the server to answer and/or close (bounded: fails after 20 s). */
function raw(port: number, bytes: Buffer | string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = tcpConnect(port, '127.0.0.1');
    let received = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server neither answered nor closed within 20 s; got: ${received.slice(0, 200)}`));
    }, 20_000);
    socket.on('data', (d) => {
      received += d.toString('latin1');
      // An answer is enough: whether the connection stays open after it is the server's business.
      if (/^HTTP\/1\.1 \d{3}/.test(received) && received.includes('\r\n\r\n')) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ status: Number(received.slice(9, 12)), closedAfterMs: Date.now() - started });
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(received);
      resolve({ status: m ? Number(m[1]) : undefined, closedAfterMs: Date.now() - started });
    });
    socket.write(bytes);
  });
}

const HOST = 'Host: 127.0.0.1\r\n';
const CASES: Record<string, string | Buffer> = {
  'a lowercase method': `get /healthz HTTP/1.1\r\n${HOST}\r\n`,
  'an unknown method': `BREW /healthz HTTP/1.1\r\n${HOST}\r\n`,
  '60 headers': `GET /healthz HTTP/1.1\r\n${HOST}${Array.from({ length: 60 }, (_, i) => `X-H${i}: ${i}\r\n`).join('')}\r\n`,
  'a raw space in the target': `GET /health z HTTP/1.1\r\n${HOST}\r\n`,
  'a 70 KB header': `GET /healthz HTTP/1.1\r\n${HOST}X-Big: ${'a'.repeat(70_000)}\r\n\r\n`,
  'a malformed chunked body': `POST /v1/calls HTTP/1.1\r\n${HOST}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n`,
};

// At once: the older build holds some of these until its idle timeout (about 10 s each).
describe.concurrent('malformed HTTP', () => {
  for (const [name, bytes] of Object.entries(CASES)) {
    it(`${name}: refused without a 5xx, and the server stays healthy`, async ({ expect }) => {
      const outcome = await raw(stack.servers[0]!.port, bytes);
      expect(build).not.toBe('');
      const documented = PARSER_STATUS[build]?.[name];
      if (documented !== undefined) expect(outcome.status, `${name} (${build})`).toBe(documented);
      else if (outcome.status !== undefined) expect(outcome.status, `${name} (${build})`).toBeLessThan(500);
      // Healthy right after: a real request is served and the server is ready.
      const d = device(stack.url);
      expect((await d.api.get('/v1/call-events')).status).toBe(200);
      expect((await api(stack.url).get('/readyz')).status).toBe(200);
    }, 30_000);
  }
});

/**
 * What a health checker gets that sends HTTP/1.0, or HTTP/1.1 without Host (haproxy's default
 * check does the first): the parser refuses both before any route runs, so /healthz and /readyz
 * cannot answer them (docs/operations.md "Health checks"). `undefined`: closed without an answer.
 */
const HEALTH_CHECKS: Record<string, { request: (path: string) => string; outcome: Record<string, number | undefined> }> = {
  'HTTP/1.0': {
    request: (path) => `GET ${path} HTTP/1.0\r\n\r\n`,
    outcome: { '@btc-vision/uwebsockets.js@20.57.0': 505, '@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0': undefined },
  },
  'HTTP/1.1 without Host': {
    request: (path) => `GET ${path} HTTP/1.1\r\n\r\n`,
    outcome: { '@btc-vision/uwebsockets.js@20.57.0': 400, '@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0': undefined },
  },
  'HTTP/1.1 with Host': {
    request: (path) => `GET ${path} HTTP/1.1\r\n${HOST}\r\n`,
    outcome: { '@btc-vision/uwebsockets.js@20.57.0': 200, '@trufflesuite/uws-js-unofficial@20.30.0-unofficial.0': 200 },
  },
};

describe('health checks', () => {
  it('HTTP/1.0, and HTTP/1.1 without Host, to /healthz and /readyz: the documented outcome of the build that loaded', async () => {
    // All at once: the older build holds a refused request until its idle timeout (about 10 s).
    const cases = Object.entries(HEALTH_CHECKS).flatMap(([name, { request, outcome }]) => ['/healthz', '/readyz'].map((path) => ({ name, path, request, outcome })));
    const outcomes = await Promise.all(cases.map((c) => raw(stack.servers[0]!.port, c.request(c.path))));
    cases.forEach((c, i) => {
      expect(Object.keys(c.outcome)).toContain(build);
      expect(outcomes[i]!.status, `${c.name} ${c.path} (${build})`).toBe(c.outcome[build]);
    });
  }, 30_000);
});
