import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './processes.js';

/**
 * Summarises a V8 .cpuprofile (written by `node --cpu-prof`): self time by function and by
 * origin (a package in node_modules, a project folder, Node's internals, GC, idle), so a report
 * can say where a server process spent its CPU.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileSummary {
  file: string;
  wallMs: number;
  /** Busy = not idle. */
  busyMs: number;
  byOrigin: { origin: string; ms: number; share: number }[];
  /** Busy time by stage of a lifecycle (stageOf), each sample charged to its stack's innermost project frame. */
  byStage: { stage: string; ms: number; share: number }[];
  topFunctions: { fn: string; where: string; ms: number; share: number }[];
}

/**
 * The stages of a lifecycle (docs/performance.md "Where a lifecycle's CPU goes"), by the project
 * file a sample's innermost project frame is in. A sample with no project frame on its stack is
 * work done from a library's or the runtime's own callbacks: replies parsed by ioredis, BullMQ's
 * timers, uWebSockets.js and the system calls under it, the collector.
 */
const STAGES: [RegExp, string][] = [
  [/^src\/(http|auth|transport)\//, 'HTTP parse, auth and response'],
  [/^src\/(calls|limits|commands)\/|^src\/redis\/scripts\.ts$/, 'script call'],
  [/^src\/events\/(relay|shardReader|outboxAcks|shardLeases)\.ts$|^src\/calls\/change\.ts$/, 'relay read'],
  [/^src\/(events\/(eventLog|audience|payloads|cursor)\.ts|history\/)/, 'event-log append'],
  [/^src\/(gateway\/|events\/earlyNotice\.ts)/, 'live publish (gateway)'],
  [/^src\/push\//, 'push build and send'],
  [/^src\/webhooks\//, 'webhook enqueue and delivery'],
  [/^src\/timers\//, 'timers'],
];

export function stageOf(relativeUrl: string): string | undefined {
  for (const [re, stage] of STAGES) if (re.test(relativeUrl)) return stage;
  return relativeUrl.startsWith('src/') ? 'other project code' : undefined;
}

export function originOf(url: string, fn: string): string {
  if (!url) {
    if (fn === '(idle)') return '(idle)';
    if (fn === '(garbage collector)') return '(garbage collector)';
    if (fn === '(program)') return '(program: native, incl. uWS and syscalls)';
    return fn || '(native)';
  }
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  if (url.startsWith('node:')) return 'node: internals';
  const rel = url.replace(/^file:\/\//, '').replace(REPO_ROOT + '/', '');
  const m = /^(src\/[^/]+|lua|bench)/.exec(rel);
  return m ? m[1]! : rel;
}

export function summariseProfile(file: string, top = 25): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) selfUs.set(samples[i]!, (selfUs.get(samples[i]!) ?? 0) + (deltas[i] ?? 0));
  const origins = new Map<string, number>();
  const fns = new Map<string, { fn: string; where: string; us: number }>();
  let idle = 0;
  let total = 0;
  for (const [id, us] of selfUs) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    total += us;
    const origin = originOf(url, functionName);
    if (origin === '(idle)') {
      idle += us;
      continue;
    }
    origins.set(origin, (origins.get(origin) ?? 0) + us);
    const where = url ? `${url.replace(/^file:\/\//, '').replace(REPO_ROOT + '/', '')}:${lineNumber + 1}` : '';
    const key = `${functionName}@${where}`;
    const f = fns.get(key) ?? { fn: functionName || '(anonymous)', where, us: 0 };
    f.us += us;
    fns.set(key, f);
  }
  const busy = total - idle;
  // Each busy sample's stage: its innermost project frame's (walking up from the sampled function).
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOfNode = new Map<number, string>();
  const nodeStage = (id: number): string => {
    const known = stageOfNode.get(id);
    if (known !== undefined) return known;
    const n = byId.get(id)!;
    // The project's path from `src/` on, whichever checkout the process ran (--compare-ref's too).
    const url = n.callFrame.url;
    const rel = url.includes('/node_modules/') ? url : (/\/(src\/.*)$/.exec(url)?.[1] ?? url);
    const up = parent.get(id);
    const stage = stageOf(rel) ?? (up === undefined ? `no project frame: ${originOf(n.callFrame.url, n.callFrame.functionName)}` : nodeStage(up));
    stageOfNode.set(id, stage);
    return stage;
  };
  const stages = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id);
    if (!n || originOf(n.callFrame.url, n.callFrame.functionName) === '(idle)') continue;
    // A sample with no project frame is named by its own (innermost) origin, not the root's.
    let stage = nodeStage(id);
    if (stage.startsWith('no project frame')) stage = `no project frame: ${originOf(n.callFrame.url, n.callFrame.functionName)}`;
    stages.set(stage, (stages.get(stage) ?? 0) + us);
  }
  return {
    file,
    wallMs: (p.endTime - p.startTime) / 1000,
    busyMs: busy / 1000,
    byOrigin: [...origins.entries()].sort((a, b) => b[1] - a[1]).map(([origin, us]) => ({ origin, ms: us / 1000, share: us / Math.max(1, busy) })),
    byStage: [...stages.entries()].sort((a, b) => b[1] - a[1]).map(([stage, us]) => ({ stage, ms: us / 1000, share: us / Math.max(1, busy) })),
    topFunctions: [...fns.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({ fn: f.fn, where: f.where, ms: f.us / 1000, share: f.us / Math.max(1, busy) })),
  };
}

/**
 * A report section for the profiles this run's processes wrote into `dir` (one sub-directory per
 * process; of its threads' profiles the busiest, the main thread, is summarised).
 */
export function profilesSection(dir: string, sinceMs: number): { markdown: string; data: ProfileSummary[] } {
  const data: ProfileSummary[] = [];
  for (const sub of readdirSync(dir).sort()) {
    const path = join(dir, sub);
    if (!statSync(path).isDirectory() || statSync(path).mtimeMs < sinceMs) continue;
    const threads = readdirSync(path)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => summariseProfile(join(path, f)));
    const main = threads.sort((a, b) => b.busyMs - a.busyMs)[0];
    if (main) data.push({ ...main, file: sub });
  }
  const out: string[] = [];
  for (const s of data) {
    out.push(
      `### ${s.file}`,
      '',
      `Main thread: ${(s.busyMs / 1000).toFixed(1)} s busy of ${(s.wallMs / 1000).toFixed(1)} s. By origin: ` +
        s.byOrigin.slice(0, 12).map((o) => `${o.origin} ${(o.share * 100).toFixed(1)}%`).join(', ') + '.',
      '',
      'By stage (each sample charged to its innermost project frame): ' +
        s.byStage.slice(0, 14).map((o) => `${o.stage} ${(o.share * 100).toFixed(1)}%`).join(', ') + '.',
      '',
      '| self time | share | function | where |',
      '| --- | --- | --- | --- |',
      ...s.topFunctions.slice(0, 15).map((f) => `| ${f.ms.toFixed(0)} ms | ${(f.share * 100).toFixed(1)}% | ${f.fn.replace(/\|/g, '\\|')} | ${f.where} |`),
      '',
    );
  }
  return { markdown: out.join('\n') || 'No profiles were written.', data };
}
