import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis, Cluster } from 'ioredis';

/**
 * Loads `lua/*.lua`, inlining `--@include "name"` lines with `lua/includes/name.lua` (each at
 * most once per script), and registers every script on an ioredis client with defineCommand,
 * which runs EVALSHA and falls back to EVAL when Redis lost its script cache.
 */

const here = dirname(fileURLToPath(import.meta.url));
/** `lua/` sits at the package root, both from `src/redis` and from `dist/src/redis`. */
export const LUA_DIR = [join(here, '../../lua'), join(here, '../../../lua')].find((d) => {
  try {
    readFileSync(join(d, 'createCall.lua'));
    return true;
  } catch {
    return false;
  }
}) ?? join(here, '../../lua');

export const scriptDefinitions = {
  createCall: { file: 'createCall.lua', numberOfKeys: 3 },
  answerCall: { file: 'answerCall.lua', numberOfKeys: 3 },
  endCall: { file: 'endCall.lua', numberOfKeys: 3 },
  readCall: { file: 'readCall.lua', numberOfKeys: 2 },
  expireCall: { file: 'expireCall.lua', numberOfKeys: 2 },
  registerPushToken: { file: 'registerPushToken.lua', numberOfKeys: 2 },
  removePushToken: { file: 'removePushToken.lua', numberOfKeys: 2 },
  appendEvents: { file: 'appendEvents.lua', numberOfKeys: 2 },
  readEvents: { file: 'readEvents.lua', numberOfKeys: 2 },
  hitRateLimit: { file: 'hitRateLimit.lua', numberOfKeys: 1 },
  renameCall: { file: 'renameCall.lua', numberOfKeys: 3 },
  clearActiveCall: { file: 'clearActiveCall.lua', numberOfKeys: 1 },
  holdShardLease: { file: 'holdShardLease.lua', numberOfKeys: 1 },
} as const;

export type ScriptName = keyof typeof scriptDefinitions;

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

let sources: Map<ScriptName, string> | undefined;

export function scriptSources(): Map<ScriptName, string> {
  if (!sources) {
    sources = new Map();
    for (const [name, def] of Object.entries(scriptDefinitions) as [ScriptName, { file: string }][]) {
      sources.set(name, loadScriptSource(def.file));
    }
  }
  return sources;
}

export function registerScripts(client: Redis | Cluster): void {
  for (const [name, lua] of scriptSources()) {
    client.defineCommand(name, { lua, numberOfKeys: scriptDefinitions[name].numberOfKeys });
  }
}

/** Receives each script's round-trip time (set once by the server for its metrics). */
export const scriptObserver: { observe?: (name: ScriptName, seconds: number) => void } = {};

/** Executes a registered script by name: keys then args, as defineCommand expects. */
export async function runScript(client: Redis | Cluster, name: ScriptName, keys: string[], args: (string | number)[]): Promise<unknown> {
  const fn = (client as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[name];
  if (!fn) throw new Error(`script ${name} is not registered on this client`);
  const observe = scriptObserver.observe;
  if (!observe) return fn.call(client, ...keys, ...args);
  const started = performance.now();
  try {
    return await fn.call(client, ...keys, ...args);
  } finally {
    observe(name, (performance.now() - started) / 1000);
  }
}
