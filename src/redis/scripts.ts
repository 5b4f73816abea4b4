import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageDir } from '../util/packageDir.js';
import type { Redis, Cluster, ChainableCommander } from 'ioredis';
import { currentTraceparent, inSpan, SpanKind, tracingEnabled } from '../observability/tracing.js';
import { primaries, topologyOf } from './connection.js';

/**
 * Loads `lua/*.lua`, inlining `--@include "name"` lines with `lua/includes/name.lua` (each at
 * most once per script), and runs them with EVALSHA, falling back to EVAL when Redis lost its
 * script cache (restart, SCRIPT FLUSH).
 *
 * Not ioredis's defineCommand: a client with defined commands copies every one of them into each
 * pipeline it creates, and with auto-pipelining that is one pipeline per event-loop turn, a
 * measurable share of the server's CPU at high call rates. Plain EVALSHA calls issued in the
 * same turn share one auto-pipelined write all the same.
 */

/** `lua/` sits at the package root, both from `src/redis` and from `dist/src/redis`. */
export const LUA_DIR = packageDir(import.meta.url, 'lua', 'createCall.lua');

/**
 * Every script (lua/<name>.lua) and how many keys it takes (`variable`: as many as the call passes). `traced`: a
 * call change whose outbox entry carries the request's trace context, passed as one more last
 * argument while tracing is on (docs/operations.md "Tracing").
 */
export const scriptDefinitions = {
  createCall: { numberOfKeys: 'variable', traced: true },
  createGroupCall: { numberOfKeys: 'variable', traced: true },
  inviteToCall: { numberOfKeys: 'variable', traced: true },
  noteRinging: { numberOfKeys: 'variable', traced: true },
  answerCall: { numberOfKeys: 'variable', traced: true },
  endCall: { numberOfKeys: 'variable', traced: true },
  endCallByServer: { numberOfKeys: 3 },
  removeMember: { numberOfKeys: 3 },
  readCall: { numberOfKeys: 3 },
  expireDue: { numberOfKeys: 'variable' },
  registerPushToken: { numberOfKeys: 1 },
  removePushToken: { numberOfKeys: 1 },
  releaseTokenOwner: { numberOfKeys: 1 },
  keepTokenOwner: { numberOfKeys: 1 },
  touchPushRegistrations: { numberOfKeys: 1 },
  migrateLegacyRegistration: { numberOfKeys: 3 },
  appendEvents: { numberOfKeys: 'variable' },
  readEvents: { numberOfKeys: 2 },
  renameCall: { numberOfKeys: 'variable', traced: true },
  sendMessage: { numberOfKeys: 'variable' },
  readMessages: { numberOfKeys: 2 },
  publishMessages: { numberOfKeys: 1 },
  holdShardLease: { numberOfKeys: 1 },
  relayHeartbeat: { numberOfKeys: 1 },
  addDeadLetters: { numberOfKeys: 2 },
  readIndexedRecords: { numberOfKeys: 1 },
  hitRateLimit: { numberOfKeys: 'variable' },
} as const satisfies Record<string, { numberOfKeys: number | 'variable'; traced?: boolean }>;

export type ScriptName = keyof typeof scriptDefinitions;

/** Each script is `lua/<its name>.lua`. */
export const scriptFile = (name: ScriptName): string => `${name}.lua`;

export function loadScriptSource(file: string, dir = LUA_DIR): string {
  const included = new Set<string>();
  const expand = (source: string): string =>
    source.replace(/^--@include "([A-Za-z0-9_]+)"\s*$/gm, (_line, name: string) => {
      if (included.has(name)) return '';
      included.add(name);
      return expand(readFileSync(join(dir, 'includes', `${name}.lua`), 'utf8'));
    });
  return expand(readFileSync(join(dir, file), 'utf8'));
}

let sources: Map<ScriptName, { lua: string; sha: string }> | undefined;

function compiled(): Map<ScriptName, { lua: string; sha: string }> {
  if (!sources) {
    sources = new Map();
    for (const name of Object.keys(scriptDefinitions) as ScriptName[]) {
      const lua = loadScriptSource(scriptFile(name));
      sources.set(name, { lua, sha: createHash('sha1').update(lua).digest('hex') });
    }
  }
  return sources;
}

/**
 * Loads every script into Redis's cache up front (SCRIPT LOAD), so the first requests do not pay
 * for it and pipelined EVALSHA (pipelineScript) finds them. A primary that lost its cache (a
 * restart, a promoted replica) is served by EVAL once, which caches the script again.
 */
export async function loadScripts(client: Redis | Cluster): Promise<void> {
  // On a cluster, into every primary's cache (EVALSHA runs where the script's keys live).
  const servers = primaries(client);
  await Promise.all(servers.flatMap((server) => [...compiled().values()].map((s) => server.script('LOAD', s.lua))));
}

type ScriptObserver = (name: ScriptName, seconds: number) => void;
/** Per connection, so two servers in one process (tests) each see only their own scripts. */
const observers = new WeakMap<Redis | Cluster, ScriptObserver>();

/** Reports each script's round-trip time on `client` to `observe` (the server's metrics). */
export function observeScripts(client: Redis | Cluster, observe: ScriptObserver): void {
  observers.set(client, observe);
}

/** Executes a script by name: keys then args (all keys in one hash slot on a cluster). */
export async function runScript(client: Redis | Cluster, name: ScriptName, keys: string[], args: (string | number)[]): Promise<unknown> {
  if (tracingEnabled()) {
    return inSpan(`redis ${name}`, { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'redis', 'db.operation.name': 'EVALSHA', 'calling.script': name } }, () => {
      const traced = 'traced' in scriptDefinitions[name] && currentTraceparent();
      return observed(client, name, keys, traced ? [...args, traced] : args);
    });
  }
  return observed(client, name, keys, args);
}

async function observed(client: Redis | Cluster, name: ScriptName, keys: string[], args: (string | number)[]): Promise<unknown> {
  const observe = observers.get(client);
  if (!observe) return evalScript(client, name, keys, args);
  const started = performance.now();
  try {
    return await evalScript(client, name, keys, args);
  } finally {
    observe(name, (performance.now() - started) / 1000);
  }
}

/**
 * Adds a script call to an explicit pipeline or transaction as EVALSHA (no fallback there: load
 * the scripts first with loadScripts, as the server does at start). `reply`, if given, gets the
 * script's reply as soon as it arrives, before the replies of the pipeline's later commands.
 */
export function pipelineScript(
  p: ChainableCommander,
  name: ScriptName,
  keys: string[],
  args: (string | number)[],
  reply?: (err: Error | null | undefined, result: unknown) => void,
): void {
  if (reply) p.evalsha(compiled().get(name)!.sha, keys.length, ...keys, ...args, reply);
  else p.evalsha(compiled().get(name)!.sha, keys.length, ...keys, ...args);
}

async function evalScript(client: Redis | Cluster, name: ScriptName, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await evalOnce(client, name, keys, args);
  } catch (err) {
    // On a cluster, an auto-pipelined command that meets MOVED/ASK (its slot moved: a failover,
    // a resharding) is not redirected by ioredis: refresh the slot map and try once more.
    if (topologyOf(client) === 'single' || !/^(MOVED|ASK) /.test(String((err as Error).message))) throw err;
    await new Promise<void>((resolve) => (client as Cluster).refreshSlotsCache(() => resolve()));
    return evalOnce(client, name, keys, args);
  }
}

async function evalOnce(client: Redis | Cluster, name: ScriptName, keys: string[], args: (string | number)[]): Promise<unknown> {
  const script = compiled().get(name)!;
  const expected = scriptDefinitions[name].numberOfKeys;
  if (expected !== 'variable' && keys.length !== expected) throw new Error(`script ${name} takes ${expected} keys, got ${keys.length}`);
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!String((err as Error).message).startsWith('NOSCRIPT')) throw err;
    // EVAL also puts the script back into Redis's cache for the next EVALSHA.
    return client.eval(script.lua, keys.length, ...keys, ...args);
  }
}
