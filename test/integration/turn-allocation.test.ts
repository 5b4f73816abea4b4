import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { startCoturn, type Coturn } from '../support/coturn.js';
import { acceptedCall } from '../support/fixtures.js';
import { mediaCredentials } from '../../src/calls/mediaCredentials.js';

/**
 * The media-session credentials against a real coturn (docs/api.md "Media session"): coturn with
 * `use-auth-secret` and the server's TURN_SECRET allocates a relay for them (turnutils_uclient
 * allocates two relays and sends packets between them), and refuses a wrong, an expired, and a
 * foreign-secret credential.
 */

const SECRET = 'turn-test-secret-6d1f0c2a9b';
let coturn: Coturn;
let stack: Stack;

beforeAll(async () => {
  coturn = await startCoturn(SECRET);
  stack = await startStack({ TURN_URLS: coturn.url, TURN_SECRET: SECRET });
});

afterAll(async () => {
  await stack?.stop();
  await coturn?.stop();
});

interface Allocation {
  code: number | null;
  output: string;
  /** Packets that came back through the relays. */
  received: number;
}

/** Runs turnutils_uclient: allocate relays with these credentials and send a few packets through them. */
function allocate(username: string, credential: string): Promise<Allocation> {
  return new Promise((res, rej) => {
    const args = ['-p', String(coturn.port), '-u', username, '-w', credential, '-y', '-n', '2', '-m', '1', '-l', '100', '127.0.0.1'];
    const child = spawn('turnutils_uclient', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 25_000);
    child.once('error', rej);
    child.once('exit', (code) => {
      clearTimeout(timer);
      const counts = [...output.matchAll(/tot_recv_msgs=(\d+)/g)].map((m) => Number(m[1]));
      res({ code, output, received: Math.max(0, ...counts) });
    });
  });
}

function expectRefused(a: Allocation): void {
  expect(a.code, a.output).not.toBe(0);
  expect(a.output).toMatch(/Cannot complete Allocation/);
  expect(a.received).toBe(0);
}

describe('media-session credentials against coturn', () => {
  it('coturn allocates relays for the credentials of both installations in the call, and refuses wrong, expired and foreign ones', async () => {
    const { callId, caller, callee } = await acceptedCall(stack.url);
    const forCaller = await caller.api.post(`/v1/calls/${callId}/media-session`, {});
    const forCallee = await callee.api.post(`/v1/calls/${callId}/media-session`, {});
    expect(forCaller.status, forCaller.text).toBe(200);
    expect(forCallee.status, forCallee.text).toBe(200);

    for (const session of [forCaller.json, forCallee.json]) {
      const turn = (session.iceServers as { urls: string[]; username: string; credential: string }[]).find((s) => s.urls.includes(coturn.url))!;
      expect(turn, JSON.stringify(session)).toBeDefined();
      const ok = await allocate(turn.username, turn.credential);
      expect(ok.code, ok.output).toBe(0);
      expect(ok.received, ok.output).toBeGreaterThan(0);

      // The right username with a credential that is off by one character.
      const last = turn.credential.at(-2) === 'A' ? 'B' : 'A';
      expectRefused(await allocate(turn.username, `${turn.credential.slice(0, -2)}${last}${turn.credential.at(-1)}`));
    }

    // Correctly signed, but expired a minute ago.
    const expired = mediaCredentials({ userId: caller.userId, nowMs: Date.now() - 660_000, ttlSeconds: 600, urls: [coturn.url], secret: SECRET });
    const e = expired.iceServers[0]!;
    expect(expired.expiresAtMs).toBeLessThan(Date.now());
    expectRefused(await allocate(e.username!, e.credential!));

    // Valid for ten minutes, signed with another secret.
    const foreign = mediaCredentials({ userId: caller.userId, nowMs: Date.now(), ttlSeconds: 600, urls: [coturn.url], secret: 'some-other-secret-0000' });
    expectRefused(await allocate(foreign.iceServers[0]!.username!, foreign.iceServers[0]!.credential!));

    // The refusals were coturn's authentication, not a dead server: coturn logged them.
    expect(coturn.logs()).toMatch(/check_stun_auth|401/);
  });
});
