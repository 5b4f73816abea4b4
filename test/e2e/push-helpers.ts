import { keys, shardOf } from '../../src/redis/keys.js';
import { partitionOfShard, partitionQueueName, queuePrefix } from '../../src/redis/partitions.js';
import { registrationField } from '../../src/push/registry.js';
import { defaultQueuePartitions } from '../../src/config/config.js';
import { PUSH_QUEUE } from '../../src/push/queues.js';
import { Queue } from 'bullmq';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { makeApnsKey, startFakeApns, type ApnsKey, type ApnsRecordedRequest, type FakeApns } from '../support/apns-server.js';
import { startFakeFcm, writeServiceAccountFile, type FakeFcm, type FcmRecordedMessage } from '../support/fcm-server.js';
import { forFile, ON_CLUSTER, startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { DEFAULT_CALL_SHARDS, device, relayDone, uid, type Device } from '../support/fixtures.js';
import { waitUntil } from '../support/wait.js';

/**
 * The push end-to-end stack: a real redis-server, a real server process (all roles unless told
 * otherwise) configured purely by environment to talk to local fake providers: two fake APNs
 * (production and sandbox origins, same signing key) and one fake FCM with its OAuth endpoint.
 * Plus small readers for what the fakes recorded and for the registration keys in Redis.
 */

export const BUNDLE_ID = 'com.example.calls';
/** The server's default key prefix (REDIS_PREFIX). */
export const PREFIX = 'cb';

/** Local APNs (production and sandbox) and FCM, and the variables that point a server at them. */
export interface PushProviders {
  apns: FakeApns;
  apnsSandbox: FakeApns;
  fcm: FakeFcm;
  key: ApnsKey;
  /** The push variables (in a push stack: the ones its first server was started with, to start more servers alike). */
  pushEnv: Record<string, string>;
  close(): Promise<void>;
}

/** A stack whose servers push to the fakes; `stop` stops both. */
export interface PushStack extends Omit<PushProviders, 'close'> {
  stack: Stack;
  url: string;
  stop(): Promise<void>;
}

/** `payloadKey`: the PUSH_PAYLOAD_KEY the fakes expect (and the server is given). */
export async function startPushProviders(payloadKey?: string): Promise<PushProviders> {
  const key = makeApnsKey();
  const fakeOpts = { bundleId: BUNDLE_ID, keyId: key.keyId, teamId: key.teamId, publicKey: key.publicKey, ...(payloadKey ? { payloadKey } : {}) };
  const [apns, apnsSandbox, fcm] = await Promise.all([startFakeApns(fakeOpts), startFakeApns(fakeOpts), startFakeFcm(payloadKey ? { payloadKey } : {})]);
  const dir = mkdtempSync(join(tmpdir(), 'push-e2e-'));
  const keyFile = join(dir, `AuthKey_${key.keyId}.p8`);
  writeFileSync(keyFile, key.privateKeyPem, { mode: 0o600 });
  const pushEnv = {
    IOS_PUSH_URL: apns.url,
    IOS_PUSH_SANDBOX_URL: apnsSandbox.url,
    IOS_PUSH_KEY_FILE: keyFile,
    IOS_PUSH_KEY_ID: key.keyId,
    IOS_PUSH_TEAM_ID: key.teamId,
    IOS_BUNDLE_ID: BUNDLE_ID,
    ANDROID_PUSH_URL: fcm.url,
    ANDROID_PROJECT_ID: fcm.projectId,
    ANDROID_SERVICE_ACCOUNT_FILE: writeServiceAccountFile(dir, fcm.serviceAccount.json),
    ...(payloadKey ? { PUSH_PAYLOAD_KEY: payloadKey } : {}),
  };
  return {
    apns,
    apnsSandbox,
    fcm,
    key,
    pushEnv,
    async close() {
      await Promise.all([apns.close(), apnsSandbox.close(), fcm.close()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function startPushStack(env: Record<string, string> = {}): Promise<PushStack> {
  const providers = await startPushProviders(env['PUSH_PAYLOAD_KEY']);
  let stack: Stack;
  try {
    stack = await startStack({ ...providers.pushEnv, ...env });
  } catch (err) {
    await providers.close();
    throw err;
  }
  const { apns, apnsSandbox, fcm, key, pushEnv } = providers;
  return {
    stack,
    url: stack.url,
    apns,
    apnsSandbox,
    fcm,
    key,
    pushEnv,
    async stop() {
      await stack.stop();
      await providers.close();
    },
  };
}

/**
 * The test file's push stack (forFile), and for each ring window in `ringWindowsMs` an api-only
 * process on the same Redis whose calls ring that long (the first server's workers push them).
 */
export function pushStackForFile(ringWindowsMs: readonly number[], started: (ps: PushStack, short: TestServer[]) => void, env: Record<string, string> = {}): void {
  forFile(
    () => startPushStack(env),
    async (ps) => started(ps, await Promise.all(ringWindowsMs.map((ms) => ps.stack.addServer({ ROLES: 'api', RING_TIMEOUT_MS: String(ms) })))),
  );
}

/** A VoIP device token: 32 bytes in hex, as iOS hands it out. */
export const iosToken = (): string => randomBytes(32).toString('hex');
/** An FCM registration token of the usual shape (`<instance id>:APA91b…`). */
export const androidToken = (): string => `${randomBytes(8).toString('base64url')}:APA91b${randomBytes(48).toString('base64url')}`;

export async function registerIos(d: Device, token: string, iosEnvironment: 'production' | 'development' = 'production'): Promise<void> {
  const res = await d.api.put(`/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/iosVoip`, {
    token,
    appId: BUNDLE_ID,
    iosEnvironment,
  });
  expect(res.status, res.text).toBe(200);
}

export async function registerAndroid(d: Device, token: string): Promise<void> {
  const res = await d.api.put(`/v1/installations/${encodeURIComponent(d.installationId)}/push-tokens/androidPush`, {
    token,
    appId: BUNDLE_ID,
  });
  expect(res.status, res.text).toBe(200);
}

export type TokenKind = 'iosVoip' | 'androidPush';

/** A new installation of `userId` on the server at `baseUrl` (`name`: the display name in its token). */
export const installation = (baseUrl: string, userId: string, name?: string): Device => device(baseUrl, userId, uid('inst'), name);

export interface Phone {
  d: Device;
  token: string;
}

/** A new installation of `userId` with a new push token of `kind` registered. */
export async function phone(baseUrl: string, userId: string, kind: TokenKind): Promise<Phone> {
  const d = installation(baseUrl, userId);
  const token = kind === 'iosVoip' ? iosToken() : androidToken();
  await (kind === 'iosVoip' ? registerIos(d, token) : registerAndroid(d, token));
  return { d, token };
}

/** Whether the installation's registration of that kind is stored (in its user's registrations hash). */
export async function isRegistered(stack: Stack, d: Device, kind: TokenKind): Promise<boolean> {
  return (await stack.redis.hexists(keys.pushRegistrations({ prefix: PREFIX, shards: 8 }, d.userId), registrationField(d.installationId, kind))) === 1;
}

/** APNs requests for one device token. */
export const apnsTo = (fake: FakeApns, token: string): ApnsRecordedRequest[] => fake.requests.filter((r) => r.token === token);

export interface FcmBody {
  message: { token: string; android: { priority: string; ttl: string }; data: { callpayload: string } } & Record<string, unknown>;
}

/** The `callpayload` of an FCM message, parsed (it travels as a JSON string). */
export function callpayloadOf(m: FcmRecordedMessage): Record<string, any> {
  const body = m.body as FcmBody;
  expect(typeof body.message.data.callpayload).toBe('string');
  return JSON.parse(body.message.data.callpayload) as Record<string, any>;
}

export function fcmBody(m: FcmRecordedMessage): FcmBody {
  return m.body as FcmBody;
}

/** FCM messages for one registration token, optionally only those whose callpayload has `type`. */
export function fcmTo(fake: FakeFcm, token: string, type?: string): FcmRecordedMessage[] {
  return fake.messages.filter((m) => m.token === token && (type === undefined || callpayloadOf(m).type === type));
}

/**
 * FCM messages without the missed-call alerts (`call.missed`, docs/protocol.md "Missed-call
 * alerts"), which a callee who missed the call gets besides its signals and which
 * test/e2e/push-missed-calls.test.ts checks.
 */
export const withoutAlerts = (messages: FcmRecordedMessage[]): FcmRecordedMessage[] => messages.filter((m) => callpayloadOf(m).type !== 'call.missed');

/** The invitations FCM received for one registration token. */
export const invitesTo = (fake: FakeFcm, token: string): FcmRecordedMessage[] => fcmTo(fake, token, 'call.invited');

/** The server's default QUEUE_PARTITIONS on this test project's Redis. */
const QUEUE_PARTITIONS = defaultQueuePartitions(ON_CLUSTER);

/**
 * Barrier for "no more pushes come of the changes made so far to the calls `callIds`", instead of
 * a quiet period: the relay is done with those changes (relayDone; for pushes, every first attempt
 * answered by the provider and every failed one queued as a retry job, src/push/dispatcher.ts),
 * and then no retry job is waiting, delayed or active in the push queues of their shards: a retry
 * still to come would be one of them (a retry that fails again queues the next one before its job
 * completes).
 */
export async function pushesSettled(ps: Pick<PushStack, 'stack'>, callIds: readonly string[], timeoutMs = 10_000): Promise<void> {
  await relayDone(ps.stack.redis, { prefix: PREFIX, shards: DEFAULT_CALL_SHARDS }, callIds, timeoutMs);
  const shards = [...new Set(callIds.map((callId) => shardOf(callId, DEFAULT_CALL_SHARDS)))];
  const partitions = [...new Set(shards.map((shard) => partitionOfShard(shard, QUEUE_PARTITIONS)))];
  const queues = partitions.map((p) => new Queue(partitionQueueName(PUSH_QUEUE, p), { connection: ps.stack.redis, prefix: queuePrefix(PREFIX) }));
  try {
    await waitUntil(
      'no push retry pending',
      async () => (await Promise.all(queues.map((q) => q.getJobCountByTypes('waiting', 'prioritized', 'paused', 'delayed', 'active')))).every((n) => n === 0),
      timeoutMs,
    );
  } finally {
    await Promise.all(queues.map((q) => q.close()));
  }
}

/** `"<n>s"` → n; fails on anything but whole seconds. */
export function ttlSeconds(m: FcmRecordedMessage): number {
  const ttl = fcmBody(m).message.android.ttl;
  expect(ttl).toMatch(/^[1-9][0-9]*s$/);
  return Number(ttl.slice(0, -1));
}

/** Re-exported: the one sleep lives in test/support/wait.ts. */
export { sleep } from '../support/wait.js';

/** Parsed JSON log lines of a server's output (other lines skipped). */
export function logRecords(output: string): Record<string, any>[] {
  const out: Record<string, any>[] = [];
  for (const line of output.split('\n')) {
    try {
      const rec = JSON.parse(line) as unknown;
      if (rec && typeof rec === 'object') out.push(rec as Record<string, any>);
    } catch {
      /* not a JSON line */
    }
  }
  return out;
}
