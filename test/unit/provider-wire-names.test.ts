import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APNS_PRODUCTION_URL, APNS_SANDBOX_URL, ApnsSender } from '../../src/push/apns.js';
import { FCM_URL, FcmSender } from '../../src/push/fcm.js';
import { FcmAccessToken, parseServiceAccount } from '../../src/push/fcmAccessToken.js';
import { Http2Pool } from '../../src/push/http2Pool.js';
import { makeApnsKey, startFakeApns, type FakeApns } from '../support/apns-server.js';
import { GOOGLE_TOKEN_URL, startFakeFcm, type FakeFcm } from '../support/fcm-server.js';

/**
 * docs/protocol.md "Names sent to Apple and Google" against the wire: every name the project's
 * push clients send (headers, paths, hosts, JSON keys, form fields, JWT header fields and claims)
 * is in the table, and every name in the table is sent. The clients talk to the local fakes, which
 * record each request as it arrived.
 */

type Provider = 'APNs' | 'FCM' | 'Google OAuth';
interface Row {
  provider: Provider;
  where: string;
  name: string;
}

function documentedNames(): Row[] {
  const page = readFileSync(new URL('../../docs/protocol.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('### Names sent to Apple and Google'));
  const rows: Row[] = [];
  for (const line of section.split('\n').slice(1)) {
    if (line.startsWith('#')) break;
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 6 || !['APNs', 'FCM', 'Google OAuth'].includes(cells[1]!)) continue;
    expect(cells[5], `documentation link for ${cells[3]}`).toMatch(/\]\(https:\/\/(developer\.apple\.com|firebase\.google\.com|developers\.google\.com)\//);
    rows.push({ provider: cells[1] as Provider, where: cells[2]!, name: cells[3]!.replace(/`/g, '') });
  }
  return rows;
}

/** Headers any HTTP client adds on its own (fetch's), not names the project chose. */
const TRANSPORT_HEADERS = new Set(['host', 'connection', 'content-length', 'accept', 'accept-encoding', 'accept-language', 'user-agent', 'sec-fetch-mode']);

/** Dotted paths of an object's leaves, stopping at `stopAt` (the payload, whose fields are ours). */
function keyPaths(value: unknown, stopAt: Set<string>, prefix = ''): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [prefix];
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return [prefix];
  return entries.flatMap(([k, v]) => {
    const path = prefix ? `${prefix}.${k}` : k;
    return stopAt.has(path) ? [path] : keyPaths(v, stopAt, path);
  });
}

describe('names sent to Apple and Google', () => {
  const sent: Row[] = [];
  const add = (provider: Provider, where: string, names: Iterable<string>) => {
    for (const name of names) sent.push({ provider, where, name });
  };
  let apns: FakeApns;
  let fcm: FakeFcm;
  let pool: Http2Pool;

  beforeAll(async () => {
    const key = makeApnsKey();
    const bundleId = 'com.example.names';
    [apns, fcm] = await Promise.all([startFakeApns({ bundleId, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey }), startFakeFcm()]);
    pool = new Http2Pool();
    const invitation = { type: 'call.invited', callId: 'c1' };

    const apnsSender = new ApnsSender({ productionUrl: apns.url, keyPem: key.privateKeyPem, keyId: key.keyId, teamId: key.teamId, bundleId, pool });
    expect(await apnsSender.sendVoip({ token: 'ab'.repeat(32), environment: 'production' }, invitation)).toMatchObject({ ok: true });
    const missed = { schemaVersion: 1 as const, eventId: 'c1:2:missed.bob', type: 'call.missed' as const, callId: 'c1', revision: '2', occurredAtMs: 1, userId: 'bob', callerUserId: 'alice', displayName: 'Alice', handle: 'app:alice', video: false };
    expect(await apnsSender.sendAlert({ token: 'cd'.repeat(32), environment: 'production' }, { payload: missed, locKey: 'MISSED_CALL', expiresAtMs: Date.now() + 60_000 })).toMatchObject({ ok: true });
    const keyFile = { ...fcm.serviceAccount.json, token_uri: GOOGLE_TOKEN_URL };
    const accessToken = new FcmAccessToken({
      serviceAccount: parseServiceAccount(JSON.stringify(keyFile)),
      fetch: (input, init) => globalThis.fetch(String(input) === GOOGLE_TOKEN_URL ? fcm.tokenUrl : input, init),
    });
    const fcmSender = new FcmSender({ url: fcm.url, projectId: fcm.projectId, accessToken, pool });
    expect(await fcmSender.send('fcm-token', { priority: 'HIGH', ttlSeconds: 30, callpayload: invitation })).toMatchObject({ ok: true });
    expect(await fcmSender.send('fcm-token', { priority: 'NORMAL', ttlSeconds: 86_400, callpayload: missed, collapseKey: 'c1' })).toMatchObject({ ok: true });

    for (const url of [APNS_PRODUCTION_URL, APNS_SANDBOX_URL]) add('APNs', 'host', [new URL(url).host]);
    // The VoIP invitation and the missed-call alert.
    for (const push of apns.requests) {
      add('APNs', 'path', [push.path.replace(/[0-9a-f]{64}$/, '<device token>')]);
      add('APNs', 'header', Object.keys(push.headers));
      add('APNs', 'JWT header', Object.keys(push.jwt!.header));
      add('APNs', 'JWT claim', Object.keys(push.jwt!.payload));
      add('APNs', 'body', keyPaths(push.body, new Set(['callpayload'])));
    }

    add('FCM', 'host', [new URL(FCM_URL).host]);
    for (const message of fcm.messages) {
      add('FCM', 'path', [message.path.replace(fcm.projectId, '<project ID>')]);
      add('FCM', 'header', Object.keys(message.headers));
      add('FCM', 'body', keyPaths(message.body, new Set(['message.data.callpayload'])));
    }

    const exchange = fcm.tokenRequests[0]!;
    add('Google OAuth', 'host', [new URL(GOOGLE_TOKEN_URL).host]);
    add('Google OAuth', 'path', [new URL(GOOGLE_TOKEN_URL).pathname]);
    add('Google OAuth', 'header', Object.keys(exchange.headers).filter((h) => !TRANSPORT_HEADERS.has(h)));
    add('Google OAuth', 'form', Object.keys(exchange.form));
    add('Google OAuth', 'JWT header', Object.keys(exchange.assertion!.header));
    add('Google OAuth', 'JWT claim', Object.keys(exchange.assertion!.payload));
  });

  afterAll(async () => {
    await pool.close();
    await Promise.all([apns.close(), fcm.close()]);
  });

  const key = (r: Row) => `${r.provider} | ${r.where} | ${r.name}`;

  it('are exactly the names the table in docs/protocol.md documents', () => {
    const documented = documentedNames().map(key).sort();
    expect(documented.length).toBeGreaterThan(30);
    expect([...new Set(sent.map(key))].sort()).toEqual(documented);
  });

  it('include no header under the ios- spelling', () => {
    expect(sent.filter((r) => r.name.startsWith('ios-'))).toEqual([]);
  });
});
