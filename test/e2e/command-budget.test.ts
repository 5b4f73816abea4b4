import { createHash } from 'node:crypto';
import WebSocket from 'ws';
import { afterAll, describe, expect, it } from 'vitest';
import { CallingClient, SignalingClient, type CallMessage, type EventPayload } from '@calling-backend/client';
import { device, relayDone, DEFAULT_CALL_SHARDS, type Device } from '../support/fixtures.js';
import { forFile } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { waitUntil } from '../support/wait.js';
import { monitorCommands, type CommandMonitor, type MonitoredCommand } from '../support/command-monitor.js';
import { newSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { androidToken, apnsTo, fcmTo, iosToken, registerAndroid, registerIos, startPushStack, PREFIX, type PushStack } from './push-helpers.js';
import { BUDGETS, SLACK } from './command-budgets.js';
import { configSchema } from '../../src/config/config.js';
import { keys, shardOf } from '../../src/redis/keys.js';
import { partitionQueueName, queuePrefix } from '../../src/redis/partitions.js';
import { loadScriptSource, scriptDefinitions, type ScriptName } from '../../src/redis/scripts.js';
import { WEBHOOK_QUEUE } from '../../src/webhooks/queue.js';
import { PUSH_QUEUE } from '../../src/push/queues.js';

/**
 * The command budget (docs/performance.md "Command budget"): one lifecycle of each kind, each
 * alone, counted exactly, against test/e2e/command-budgets.ts. Redis's own MONITOR lists every
 * command it ran, script calls with the commands inside them; what a server does whether calls
 * come or not is left out by the rule of `isPeriodic` below, so the count is the same on a quiet
 * machine and on a loaded one. A time is never measured here (speed lives in the bench).
 */

const KS = { prefix: PREFIX, shards: DEFAULT_CALL_SHARDS };
/** The unanswered calls' ring window: they are created through an api process of their own with it. */
const SHORT_RING_MS = 2000;
/** Production's rate limits (the test servers turn them off unless told). */
const DEFAULT_LIMITS = Object.fromEntries(
  (['RATE_CALL_CREATES_PER_MIN', 'RATE_INVITES_PER_CALLEE_PER_MIN', 'RATE_CALL_MESSAGES_PER_10S', 'RATE_WS_MESSAGES_PER_10S'] as const).map((k) => [
    k,
    String(configSchema.shape[k].parse(undefined)),
  ]),
);

let ps: PushStack;
/** An api process on the same Redis whose calls ring for SHORT_RING_MS (the first server relays them). */
let shortRing: TestServer;
let receiver: WebhookReceiver;
let monitor: CommandMonitor;
/** The test's own connection, whose reads are not the lifecycle's. */
let testClient: string;

forFile(
  async () => {
    const secret = newSecret();
    receiver = await startWebhookReceiver([secret]);
    const stack = await startPushStack({ ...DEFAULT_LIMITS, WEBHOOKS: JSON.stringify([{ id: 'app', url: receiver.url, secret }]) });
    shortRing = await stack.stack.addServer({ ...DEFAULT_LIMITS, ROLES: 'api', RING_TIMEOUT_MS: String(SHORT_RING_MS) });
    monitor = await monitorCommands(Number(new URL(stack.stack.redisUrl).port));
    return {
      stack,
      async stop() {
        monitor.close();
        await stack.stop();
        await receiver.close();
      },
    };
  },
  async (s) => {
    ps = s.stack;
    testClient = /addr=(\S+)/.exec(String(await ps.stack.redis.client('INFO')))![1]!;
  },
);

/** One device with the real client package: its API client and its signaling socket. */
interface App {
  d: Device;
  api: CallingClient;
  /** The same device's API client on the short-ring api process (it creates the unanswered calls). */
  shortRingApi: CallingClient;
  signaling: SignalingClient;
  events: EventPayload[];
  messages: CallMessage[];
}

const apps: App[] = [];
afterAll(() => {
  for (const a of apps) a.signaling.stop();
});

async function app(userId?: string): Promise<App> {
  const d = device(ps.url, userId);
  const events: EventPayload[] = [];
  const messages: CallMessage[] = [];
  const signaling = new SignalingClient({
    url: ps.url.replace(/^http/, 'ws'),
    token: d.token,
    WebSocket,
    onEvent: (e) => events.push(e),
    onMessage: (m) => messages.push(m),
  });
  await signaling.start();
  const a = {
    d,
    api: new CallingClient({ baseUrl: ps.url, token: d.token, signaling }),
    shortRingApi: new CallingClient({ baseUrl: shortRing.url, token: d.token }),
    signaling,
    events,
    messages,
  };
  apps.push(a);
  return a;
}

/** A caller, and a callee with an iPhone (VoIP push) and an Android tablet, all online. */
interface Parties {
  caller: App;
  phone: App;
  tablet: App;
  tokens: { ios: string; android: string };
}

async function parties(): Promise<Parties> {
  const caller = await app();
  const phone = await app();
  const tablet = await app(phone.d.userId);
  const tokens = { ios: iosToken(), android: androidToken() };
  await registerIos(phone.d, tokens.ios);
  await registerAndroid(tablet.d, tokens.android);
  return { caller, phone, tablet, tokens };
}

const has = (a: App, callId: string, type: string, reason?: string) => () =>
  a.events.some((e) => e.callId === callId && e.type === type && (reason === undefined || ('reason' in e && e.reason === reason)));

const webhooked = (callId: string, type: string) => () => [...receiver.unique().values()].some((w) => w.json?.type === type && w.json?.data?.callId === callId);

/**
 * Waits until everything a step set off is done, so that the next step starts from rest: what
 * the step's parties must see, then the relay's part (its outbox entries relayed, acknowledged
 * and trimmed), the webhook and push queues empty, and every command before this point in the
 * monitor's hands.
 */
async function settle(callId: string, ...seen: (() => boolean)[]): Promise<void> {
  for (const [i, s] of seen.entries()) await waitUntil(`what the step set off (${i})`, s, 10_000);
  await relayDone(ps.stack.redis, KS, [callId]);
  const outbox = keys.outboxForShard(KS, shardOf(callId, KS.shards));
  await waitUntil('the outbox trimmed', async () => (await ps.stack.redis.xlen(outbox)) === 0, 10_000);
  await waitUntil('the webhook stream trimmed', async () => (await ps.stack.redis.xlen(keys.webhookStream(KS, 0))) === 0, 10_000);
  const queue = (name: string) => `${queuePrefix(PREFIX)}:${partitionQueueName(name, 0)}`;
  await waitUntil('the webhook and push queues empty', async () => {
    const lengths = await Promise.all(
      [WEBHOOK_QUEUE, PUSH_QUEUE].flatMap((q) => [ps.stack.redis.llen(`${queue(q)}:wait`), ps.stack.redis.llen(`${queue(q)}:active`), ps.stack.redis.zcard(`${queue(q)}:delayed`)]),
    );
    return lengths.every((n) => n === 0);
  }, 10_000);
  await monitor.barrier();
}

type Kind = keyof typeof BUDGETS;

/** One lifecycle of `kind`, step by step (settle after each). */
async function lifecycle(kind: Kind, p: Parties): Promise<string> {
  const { caller, phone, tablet } = p;
  const call = await (kind === 'unanswered' ? caller.shortRingApi : caller.api).createCall({ calleeUserId: phone.d.userId });
  const callId = call.callId;
  await settle(
    callId,
    has(phone, callId, 'call.invited'),
    has(tablet, callId, 'call.invited'),
    () => apnsTo(ps.apns, p.tokens.ios).some((r) => JSON.stringify(r.body).includes(callId)),
    () => fcmTo(ps.fcm, p.tokens.android, 'call.invited').some((m) => JSON.stringify(m.body).includes(callId)),
    webhooked(callId, 'call.created'),
  );
  switch (kind) {
    case 'answered':
      await phone.api.answer(callId, { installationId: phone.d.installationId });
      await settle(callId, has(caller, callId, 'call.accepted'), has(tablet, callId, 'call.ended', 'answeredElsewhere'), webhooked(callId, 'call.accepted'));
      await caller.api.sendMessage(callId, { kind: 'offer', sdp: 'v=0' });
      await settle(callId, () => phone.messages.some((m) => m.callId === callId));
      await caller.api.end(callId, { reason: 'localHangup' });
      await settle(callId, has(phone, callId, 'call.ended', 'remoteEnded'), webhooked(callId, 'call.ended'));
      break;
    case 'declined':
      await phone.api.end(callId, { reason: 'declined' });
      await settle(callId, has(caller, callId, 'call.ended', 'declined'), has(tablet, callId, 'call.ended'), webhooked(callId, 'call.ended'));
      break;
    case 'cancelled':
      await caller.api.end(callId, { reason: 'localHangup' });
      await settle(callId, has(phone, callId, 'call.ended', 'callerCancelled'), has(tablet, callId, 'call.ended', 'callerCancelled'), webhooked(callId, 'call.ended'));
      break;
    case 'unanswered':
      await waitUntil('the ring window over', has(caller, callId, 'call.ended', 'unanswered'), SHORT_RING_MS + 10_000);
      await settle(callId, has(phone, callId, 'call.ended', 'unanswered'), has(tablet, callId, 'call.ended', 'unanswered'), webhooked(callId, 'call.ended'));
      break;
  }
  return callId;
}

/** The commands of one script call or command: the call itself and what ran inside it. */
interface Unit {
  top: MonitoredCommand;
  inner: MonitoredCommand[];
}

function units(commands: MonitoredCommand[]): Unit[] {
  const out: Unit[] = [];
  for (const c of commands) {
    if (c.client === 'lua') out.at(-1)?.inner.push(c);
    else out.push({ top: c, inner: [] });
  }
  return out;
}

/** BullMQ's own keys of a queue; any other key under `q:{…}:` is a job's. */
const QUEUE_KEYS = new Set(['', 'wait', 'active', 'paused', 'meta', 'prioritized', 'delayed', 'events', 'stalled', 'stalled-check', 'limiter', 'marker', 'pc', 'id', 'completed', 'failed', 'repeat', 'de']);
const queueKey = /:q:\{([^}]+)\}:([^:]*)/;

/**
 * Work a server does whether calls come or not, at its own pace, left out of the count:
 *   - the relay's shard leases and heartbeat (keys `relays`, `*:relay-lease`);
 *   - the relay's blocking read when it returned nothing (a read counts when it follows, on its
 *     connection, the delivery of what the previous read returned: one per relayed batch);
 *   - the ring sweeps' schedule: their BullMQ job (`q:{timers-*}`, one a second per partition),
 *     their clock read (TIME) and their look at the ring index (ZRANGE of `*:ringing`); the script
 *     that ends a due call (expireDue) counts;
 *   - BullMQ's waiting: a worker's BZPOPMIN and every queue command that touches no job (a look
 *     that found nothing, the stalled-job check); adding, taking and finishing a job count;
 *   - the webhook streams' waiting: their readers' blocking reads and their look for entries to
 *     take over (XAUTOCLAIM); one read is counted for each entry added (`count`: the read that
 *     returns it), and the entries' acknowledgements and trims count;
 *   - the webhook endpoints' state, read into a cache at most every 2 s.
 */
function isPeriodic(u: Unit, sentSinceRead: Map<string, boolean>): boolean {
  const { top } = u;
  const args = [...top.args, ...u.inner.flatMap((c) => c.args)];
  if (args.some((a) => a.endsWith(':relays') || a.endsWith(':relay-lease'))) return true;
  if (top.name === 'xreadgroup' && isWebhookStream(top.args)) return true;
  if (top.name === 'xreadgroup') {
    const delivered = sentSinceRead.get(top.client) === true;
    sentSinceRead.set(top.client, false);
    return !(delivered && top.args.includes('BLOCK'));
  }
  if (top.name !== 'xack') sentSinceRead.set(top.client, true);
  if (top.name === 'time') return true;
  if (top.name === 'zrange' && top.args[0]?.endsWith(':ringing')) return true;
  if (top.name === 'bzpopmin' || top.name === 'xautoclaim') return true;
  const queues = args.map((a) => queueKey.exec(a)).filter((m): m is RegExpExecArray => m !== null);
  if (queues.some((m) => m[1]!.startsWith('timers-'))) return true;
  if (queues.length > 0 && !queues.some((m) => !QUEUE_KEYS.has(m[2]!))) return true;
  if (top.name === 'hgetall' && top.args[0] === keys.webhookDisabled(KS)) return true;
  return false;
}

const webhookStream = keys.webhookStream(KS, 0);
const isWebhookStream = (args: readonly string[]) => args.includes(webhookStream);

const scriptBySha = new Map(
  (Object.keys(scriptDefinitions) as ScriptName[]).map((name) => [createHash('sha1').update(loadScriptSource(name)).digest('hex'), name]),
);

/** What a lifecycle made Redis run, by source: `<script> (+n inside)` or the command's name. */
interface Count {
  total: number;
  bySource: Map<string, number>;
}

function count(commands: MonitoredCommand[]): Count {
  const sentSinceRead = new Map<string, boolean>();
  const bySource = new Map<string, number>();
  let total = 0;
  for (const u of units(commands)) {
    if (u.top.client === testClient || isPeriodic(u, sentSinceRead)) continue;
    const script = u.top.name === 'evalsha' ? scriptBySha.get(u.top.args[0]!) : undefined;
    const source = script ? `script ${script}` : u.top.name === 'evalsha' || u.top.name === 'eval' ? 'BullMQ script' : u.top.name;
    bySource.set(source, (bySource.get(source) ?? 0) + 1 + u.inner.length);
    total += 1 + u.inner.length;
    // The webhook stream reader's read that returns this entry (isPeriodic).
    if (u.top.name === 'xadd' && isWebhookStream(u.top.args)) {
      bySource.set('xreadgroup', (bySource.get('xreadgroup') ?? 0) + 1);
      total += 1;
    }
  }
  return { total, bySource };
}

/** HTTP requests and command frames the servers answered (their own metrics). */
async function roundTrips(): Promise<number> {
  let n = 0;
  for (const server of ps.stack.servers) {
    const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (/^calling_(http_requests_total|ws_commands_total)\{/.test(line)) n += Number(line.split(' ').at(-1));
    }
  }
  return n;
}

const measured = new Map<Kind, { commands: number; roundTrips: number; bySource: Map<string, number> }>();

describe('command budget', () => {
  for (const kind of Object.keys(BUDGETS) as Kind[]) {
    it(`${kind}: within its budget of Redis commands and client round trips`, async () => {
      const p = await parties();
      // A first lifecycle of the same parties, not counted: the next one finds their event logs,
      // histories and the providers' connections as anyone who called before does.
      await lifecycle(kind, p);
      // ...but whose rate-limit windows have lapsed: a user seldom creates two calls in a minute
      // (their windows are one minute), so the create counted is the first of its window, as most are.
      await ps.stack.redis.del(keys.callCreateLimit(KS, p.caller.d.userId), keys.inviteLimit(KS, p.phone.d.userId));
      // The metrics scrape makes Redis commands of its own: before the count starts.
      const before = await roundTrips();
      await monitor.barrier();
      monitor.take();
      await lifecycle(kind, p);
      const c = count(monitor.take());
      const trips = (await roundTrips()) - before;
      measured.set(kind, { commands: c.total, roundTrips: trips, bySource: c.bySource });
      const budget = BUDGETS[kind];
      const detail = `${kind}: ${c.total} Redis commands (${[...c.bySource].map(([s, n]) => `${s} ${n}`).join(', ')}), ${trips} round trips`;
      expect(c.total, `${detail}: over the budget of ${budget.redisCommands}`).toBeLessThanOrEqual(budget.redisCommands);
      expect(c.total, `${detail}: lower the budget to ${c.total}`).toBeGreaterThanOrEqual(budget.redisCommands - SLACK);
      expect(trips, detail).toBe(budget.clientRoundTrips);
    }, 90_000);
  }
});

afterAll(() => {
  // The counts as a table, for docs/performance.md and for whoever raises a budget.
  const rows = [...measured].map(([kind, m]) => `${kind.padEnd(10)} ${String(m.commands).padStart(4)} commands  ${m.roundTrips} round trips  ${[...m.bySource].map(([s, n]) => `${s} ${n}`).join(', ')}`);
  if (rows.length > 0) console.log(`command budget:\n${rows.join('\n')}`);
});
