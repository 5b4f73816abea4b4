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

/**
 * The arguments every change of an existing call takes after its own (lua/includes/openCallChange.lua):
 * the retention, the operation record's lifetime, the request's fingerprint, and whether the
 * change's early notice is published (src/calls/scriptArgs.ts earlyNoticeArg).
 */
const CHANGE_ARGS = ['retention', 'operationTtlMs', 'fingerprint', 'earlyNotice'] as const;
/** What both creates take (lua/createCall.lua, lua/createGroupCall.lua) before their callees. */
const CREATE_ARGS = [
  'callId',
  'callerUserId',
  'callerInstallationId',
  'callerDisplayName',
  'callerHandle',
  'video',
  'ringTimeoutMs',
  'retention',
  'operationTtlMs',
  'fingerprint',
  'firstUse',
  'earlyNotice',
  'limits',
  'recordFormat',
] as const;

/** `lua/` sits at the package root, both from `src/redis` and from `dist/src/redis`. */
export const LUA_DIR = packageDir(import.meta.url, 'lua', 'createCall.lua');

/**
 * Every script (lua/<name>.lua): how many keys it takes (`variable`: as many as the call passes),
 * and its arguments by name. `args` is the one place their order is written: the loader binds
 * them to Lua locals of the same names where the script says `--@arguments`, and runScript lays
 * a call's named arguments out in the same order (ScriptArgs). `rest`: the name of a list that
 * follows them (records the script walks; its first index is the Lua local `<rest>From`).
 * `traced`: a call change whose outbox entry carries the request's trace context, passed as one
 * more last argument (`traceparent`) while tracing is on (docs/operations.md "Tracing").
 */
export const scriptDefinitions = {
  createCall: { numberOfKeys: 'variable', traced: true, args: [...CREATE_ARGS, 'calleeUserId', 'busy', 'policyAt', 'screened', 'screenedReply'] },
  createGroupCall: { numberOfKeys: 'variable', traced: true, args: [...CREATE_ARGS, 'invitees', 'busy', 'title', 'policyAt', 'screened', 'screenedReply'] },
  inviteToCall: {
    numberOfKeys: 'variable',
    traced: true,
    args: ['userId', 'installationId', 'invitees', 'busy', 'ringTimeoutMs', 'maxInvitees', 'limits', 'policyAt', 'screened', 'screenedReply', ...CHANGE_ARGS],
  },
  noteRinging: { numberOfKeys: 'variable', traced: true, args: ['userId', 'via', ...CHANGE_ARGS] },
  answerCall: { numberOfKeys: 'variable', traced: true, args: ['userId', 'installationId', 'expectedRevision', 'firstUse', ...CHANGE_ARGS] },
  moveCall: { numberOfKeys: 'variable', traced: true, args: ['userId', 'installationId', 'expectedRevision', 'firstUse', ...CHANGE_ARGS] },
  endCall: { numberOfKeys: 'variable', traced: true, args: ['userId', 'installationId', 'reason', 'forAll', 'firstUse', ...CHANGE_ARGS] },
  endCallByServer: { numberOfKeys: 3, args: ['reason', 'retention', 'earlyNotice'] },
  removeMember: { numberOfKeys: 3, args: ['userId', 'retention', 'earlyNotice'] },
  readCall: { numberOfKeys: 3, args: ['userId', 'retention', 'earlyNotice'] },
  expireDue: { numberOfKeys: 'variable', args: ['retention', 'earlyNotice'], rest: 'callIds' },
  registerPushToken: { numberOfKeys: 1, args: ['token', 'tokenHash', 'appId', 'iosEnvironment', 'field', 'idleMs'] },
  removePushToken: { numberOfKeys: 1, args: ['field', 'tokenHash', 'notAfterMs'] },
  releaseTokenOwner: { numberOfKeys: 1, args: ['owner', 'onlyUnexpiring'] },
  keepTokenOwner: { numberOfKeys: 1, args: ['owner', 'expireAtMs'] },
  touchPushRegistrations: { numberOfKeys: 1, args: ['idleMs'] },
  migrateLegacyRegistration: { numberOfKeys: 3, args: ['field', 'idleMs'] },
  appendEvents: {
    numberOfKeys: 'variable',
    args: ['maxLen', 'maxAgeMs', 'metaTtlMs', 'newEpoch', 'ageCheckMs', 'historyRetentionMs', 'noticeChannel'],
    rest: 'blocks',
  },
  readEvents: { numberOfKeys: 2, args: ['cursorEpoch', 'cursorId', 'limit', 'newEpoch', 'metaTtlMs'] },
  renameCall: { numberOfKeys: 'variable', traced: true, args: ['userId', 'displayName', 'maxRenames', ...CHANGE_ARGS] },
  sendMessage: {
    numberOfKeys: 'variable',
    args: ['userId', 'installationId', 'eventId', 'payloadJson', 'retention', 'operationTtlMs', 'fingerprint', 'maxKept', 'messagesTtlMs', 'liveChannel', 'limit', 'windowMs'],
  },
  sendSignals: { numberOfKeys: 'variable', args: ['noticeChannel', 'limit', 'windowMs', 'presenceTtlMs', 'viewTtlMs'], rest: 'signals' },
  readPresence: { numberOfKeys: 2, args: [] },
  readMessages: { numberOfKeys: 2, args: ['userId', 'installationId', 'afterSeq'] },
  publishMessages: { numberOfKeys: 1, args: [], rest: 'messages' },
  holdShardLease: { numberOfKeys: 1, args: ['holder', 'leaseMs', 'release'] },
  relayHeartbeat: { numberOfKeys: 1, args: ['relay', 'leaseMs', 'leaving'] },
  addDeadLetters: { numberOfKeys: 2, args: ['maxKept'], rest: 'letters' },
  readIndexedRecords: { numberOfKeys: 1, args: ['cursorMs', 'cursorId', 'limit', 'minMs'] },
  hitRateLimit: { numberOfKeys: 'variable', args: [], rest: 'rules' },
  readCallPolicy: { numberOfKeys: 2, args: ['callerUserId'] },
  editCallPolicy: { numberOfKeys: 1, args: ['mode', 'block', 'unblock', 'maxBlocked', 'dndUntil', 'dndAction', 'favourite', 'unfavourite', 'maxFavourites'] },
  replaceAllowList: { numberOfKeys: 3, args: ['replaceId', 'page', 'userIds', 'last', 'maxAllowed', 'stagingTtlMs'] },
} as const satisfies Record<string, ScriptDefinition>;

interface ScriptDefinition {
  numberOfKeys: number | 'variable';
  args: readonly string[];
  rest?: string;
  traced?: boolean;
}

export type ScriptName = keyof typeof scriptDefinitions;

type Definition<N extends ScriptName> = (typeof scriptDefinitions)[N];
/**
 * A script call's arguments, by name: each of the script's `args`, and its `rest` list if it has
 * one. A name missing or misspelt here does not compile.
 */
export type ScriptArgs<N extends ScriptName> = { readonly [K in Definition<N>['args'][number]]: string } & (Definition<N> extends { rest: infer R extends string }
  ? { readonly [K in R]: readonly string[] }
  : unknown);

/** One call of script `N`: its keys, and its arguments by name. */
export interface ScriptCall<N extends ScriptName> {
  keys: string[];
  args: ScriptArgs<N>;
}

/** ARGV of a script call: its named arguments in the script's order, then its rest list. */
export function argv<N extends ScriptName>(name: N, args: ScriptArgs<N>): string[] {
  const def: ScriptDefinition = scriptDefinitions[name];
  const named = args as unknown as Record<string, string | readonly string[]>;
  // A name the script does not take would be dropped without a word: refuse it, and a missing one.
  const given = Object.keys(named);
  if (given.length !== def.args.length + (def.rest ? 1 : 0) || given.some((a) => named[a] === undefined)) {
    throw new Error(`script ${name} takes ${[...def.args, ...(def.rest ? [def.rest] : [])].join(', ')}; got ${given.join(', ')}`);
  }
  const out = def.args.map((a) => named[a] as string);
  return def.rest ? out.concat(named[def.rest] as readonly string[]) : out;
}

/**
 * The Lua that binds a script's arguments to locals of their names (what `--@arguments` becomes):
 * `local userId, installationId = ARGV[1], ARGV[2]`, then `traceparent` for a traced script and
 * `<rest>From` for one with a rest list.
 */
export function argumentBindings(name: ScriptName): string {
  const def: ScriptDefinition = scriptDefinitions[name];
  const lines: string[] = [];
  if (def.args.length > 0) lines.push(`local ${def.args.join(', ')} = ${def.args.map((_, i) => `ARGV[${i + 1}]`).join(', ')}`);
  if (def.traced) lines.push(`local traceparent = ARGV[${def.args.length + 1}]`);
  if (def.rest) lines.push(`local ${def.rest}From = ${def.args.length + 1}`);
  return lines.join('\n');
}

/** Each script is `lua/<its name>.lua`. */
export const scriptFile = (name: ScriptName): string => `${name}.lua`;

/**
 * A script's source as Redis runs it: `--@include "name"` lines inlined with
 * `lua/includes/name.lua` (each at most once), and its `--@arguments` line with the bindings of
 * its named arguments (argumentBindings).
 */
export function loadScriptSource(name: ScriptName, dir = LUA_DIR): string {
  const source = readFileSync(join(dir, scriptFile(name)), 'utf8');
  const bound = source.replace(/^--@arguments\s*$/m, () => argumentBindings(name));
  if (bound === source) throw new Error(`lua/${scriptFile(name)} has no --@arguments line`);
  return expandIncludes(bound, dir);
}

/** `source` with its `--@include "name"` lines inlined from `lua/includes/name.lua`, each at most once. */
export function expandIncludes(source: string, dir = LUA_DIR): string {
  const included = new Set<string>();
  const expand = (text: string): string =>
    text.replace(/^--@include "([A-Za-z0-9_]+)"\s*$/gm, (_line, include: string) => {
      if (included.has(include)) return '';
      included.add(include);
      return expand(readFileSync(join(dir, 'includes', `${include}.lua`), 'utf8'));
    });
  return expand(source);
}

let sources: Map<ScriptName, { lua: string; sha: string }> | undefined;

function compiled(): Map<ScriptName, { lua: string; sha: string }> {
  if (!sources) {
    sources = new Map();
    for (const name of Object.keys(scriptDefinitions) as ScriptName[]) {
      const lua = loadScriptSource(name);
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
export async function runScript<N extends ScriptName>(client: Redis | Cluster, name: N, keys: string[], named: ScriptArgs<N>): Promise<unknown> {
  const args = argv(name, named);
  if (tracingEnabled()) {
    return inSpan(`redis ${name}`, { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'redis', 'db.operation.name': 'EVALSHA', 'calling.script': name } }, () => {
      const traced = 'traced' in scriptDefinitions[name] && currentTraceparent();
      return observed(client, name, keys, traced ? [...args, traced] : args);
    });
  }
  return observed(client, name, keys, args);
}

async function observed(client: Redis | Cluster, name: ScriptName, keys: string[], args: string[]): Promise<unknown> {
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
export function pipelineScript<N extends ScriptName>(
  p: ChainableCommander,
  name: N,
  keys: string[],
  named: ScriptArgs<N>,
  reply?: (err: Error | null | undefined, result: unknown) => void,
): void {
  const args = argv(name, named);
  if (reply) p.evalsha(compiled().get(name)!.sha, keys.length, ...keys, ...args, reply);
  else p.evalsha(compiled().get(name)!.sha, keys.length, ...keys, ...args);
}

async function evalScript(client: Redis | Cluster, name: ScriptName, keys: string[], args: string[]): Promise<unknown> {
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

async function evalOnce(client: Redis | Cluster, name: ScriptName, keys: string[], args: string[]): Promise<unknown> {
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
