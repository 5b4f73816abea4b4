import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ALL_SCENARIOS } from '../../bench/lib/args.js';

/**
 * The bench smoke test (issue #50, bench/README.md "Smoke size and the bench smoke test"): every scenario of the bench runs
 * at its smoke size (`--size smoke`, in three runs at once: a few seconds and a few dozen calls each,
 * against its own redis-server and server processes on free ports) and must be valid: no errors,
 * non-zero throughput, every expected event counted. A storage or protocol change that breaks a
 * scenario then fails here instead of printing its breakage as a figure. The second case shows
 * the check can fail: the servers store calls as hashes (CALL_RECORD_FORMAT=hash) while the bench
 * reads them with a reader that knows only the string form (BENCH_CALL_READER=string-only), and the
 * run must be INVALID and exit non-zero. No assertion is on a duration or a latency: the figures
 * of a smoke run mean nothing, only its counts do.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Result {
  id: string;
  error?: string;
  invalid?: string[];
  headlines: { metric: string; value: string }[];
  data: any;
}

async function bench(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; output: string; results: Result[]; html: string }> {
  const out = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
  dirs.push(out);
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--size', 'smoke', '--out', out, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr.on('data', (b: Buffer) => (output += b.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  const json = readdirSync(out).find((f) => f.endsWith('.json'));
  const results = json ? (JSON.parse(readFileSync(join(out, json), 'utf8')) as { results: Result[] }).results : [];
  const page = readdirSync(out).find((f) => f.endsWith('.html') && f !== 'latest.html');
  return { code, output, results, html: page ? readFileSync(join(out, page), 'utf8') : '' };
}

/**
 * The scenarios in three bench runs at once, each with its own Redis and servers: one run of them
 * all took about 190 s of one test worker, most of it waiting (server starts, fixed-length steps
 * at 10/s), beside a machine about half busy. What reads another scenario's findings stays in its
 * run: the storm, group and soak read the lifecycle's (webhooks has its smoke rate set), compare
 * the idle scenario's.
 */
const SMOKE_RUNS = [
  ['micro', 'ceilings', 'lifecycle', 'storm', 'group', 'soak'],
  ['webhooks', 'timers', 'reconnect'],
  ['idle', 'compare'],
];

describe.concurrent('bench smoke', () => {
  it('every scenario runs at the smoke size and is valid: no errors, non-zero throughput, every expected event counted', async () => {
    // Every scenario is in one of the runs (the comparison of two builds is --compare-ref's).
    expect(SMOKE_RUNS.flat().sort()).toEqual(ALL_SCENARIOS.filter((s) => s !== 'compareRef').sort());
    const runs = await Promise.all(SMOKE_RUNS.map((scenarios) => bench(['--scenarios', scenarios.join(',')])));
    const output = runs.map((r) => r.output).join('\n');
    const results = runs.flatMap((r) => r.results);
    const byId = Object.fromEntries(results.map((r) => [r.id, r]));
    // Every scenario ran, none INVALID.
    expect(Object.keys(byId).sort(), output).toEqual(SMOKE_RUNS.flat().sort());
    for (const r of results) expect({ id: r.id, error: r.error, invalid: r.invalid ?? [] }).toEqual({ id: r.id, error: undefined, invalid: [] });
    for (const { code, output } of runs) expect(code, output).toBe(0);

    // The counts, read here from the JSON independently of the bench's own validity rules.
    const steps = (d: any) => d.steps as { label: string; started: number; completed: number; achievedRate: number; errors: Record<string, number>; latency: Record<string, { count: number }> }[];
    for (const id of ['lifecycle', 'group']) {
      const sustained = steps(byId[id]!.data).find((s) => s.label === byId[id]!.data.sustained)!;
      expect(sustained.achievedRate, id).toBeGreaterThan(0);
      expect(sustained.completed, id).toBe(sustained.started);
      expect(sustained.errors, id).toEqual({});
      for (const [step, s] of Object.entries(sustained.latency)) expect(s.count, `${id}: ${step}`).toBeGreaterThan(0);
    }
    // Capacity: both ran a saturated closed-loop step that completed lifecycles.
    for (const id of ['lifecycle', 'group']) {
      const saturated = byId[id]!.data.saturated as { achievedRate: number; completed: number; errors: Record<string, number> };
      expect(saturated.achievedRate, id).toBeGreaterThan(0);
      expect(saturated.errors, id).toEqual({});
    }
    // Push is configured in a smoke run, so the lifecycle counted its pushes, hop by hop too.
    const lifecycleSustained = steps(byId.lifecycle!.data).find((s) => s.label === byId.lifecycle!.data.sustained)!;
    expect(Object.keys(lifecycleSustained.latency).some((k) => k.startsWith('push:'))).toBe(true);
    expect(lifecycleSustained.latency['push hop: create committed → provider request']?.count).toBeGreaterThan(0);

    const storm = byId.storm!.data as { completed: number; started: number; answers: Record<string, number>; errors: Record<string, number> };
    expect(storm.completed).toBeGreaterThan(0);
    expect(storm.completed).toBe(storm.started);
    expect(storm.answers['200']).toBe(storm.completed);

    const [timers] = byId.timers!.data.runs as { created: number; peakPending: number; expiryRate: number; committed: { count: number }; delivered: { count: number }; errors: Record<string, number> }[];
    expect(timers!.created).toBeGreaterThan(0);
    expect(timers!.committed.count).toBe(timers!.created);
    expect(timers!.peakPending).toBeGreaterThan(0);
    expect(timers!.expiryRate).toBeGreaterThan(0);
    expect(timers!.delivered.count).toBeGreaterThan(0);
    expect(timers!.errors).toEqual({});

    expect(byId.idle!.data.ours.heldOpen).toBeGreaterThan(0);
    expect(byId.compare!.data.ours.throughput.perSecond).toBeGreaterThan(0);
    expect(byId.compare!.data.socketio.throughput.perSecond).toBeGreaterThan(0);
    // The floor of a copy (bench/ceilings/uwsFanout.ts): every round sent to each socket, at some CPU.
    const floor = byId.compare!.data.sendFloor;
    expect(floor.sent % floor.sockets).toBe(0);
    expect(floor.sent).toBeGreaterThanOrEqual(floor.sockets * 200);
    expect(floor.cpuPerSendUs).toBeGreaterThan(0);
    // The reconnect storm: every device of the killed gateway back, nothing lost, out of order or extra.
    const reconnect = byId.reconnect!.data;
    expect(reconnect.resyncedMs).toHaveLength(reconnect.onA);
    expect(reconnect.onA).toBeGreaterThan(0);
    expect({ lost: reconnect.lost, outOfOrder: reconnect.outOfOrder, extra: reconnect.extra }).toEqual({ lost: 0, outOfOrder: 0, extra: 0 });
    // Each device's way back, step by step, for both systems (bench/lib/wayBack.ts): every device of A saw each step.
    for (const wayBack of [reconnect.wayBack, reconnect.socketio.wayBack]) {
      for (const step of ['closed', 'attempt', 'open', 'synced']) expect(wayBack.steps[step].n, step).toBe(reconnect.onA);
      expect(wayBack.openToSynced.n).toBe(reconnect.onA);
      expect(wayBack.openToSynced.p99).toBeGreaterThanOrEqual(0);
      expect(wayBack.steps.synced.p50).toBeGreaterThanOrEqual(wayBack.steps.open.p50);
    }
    expect(byId.webhooks!.data.results.find((r: { variant: string }) => r.variant === 'on').received).toBeGreaterThan(0);
    expect(byId.soak!.data.samples.reduce((a: number, s: { completed: number }) => a + s.completed, 0)).toBeGreaterThan(0);
    expect(byId.ceilings!.data.redis.lifecycle.r.perSecond).toBeGreaterThan(0);
  }, 600_000);

  it('fails when the bench reads calls with a reader that does not know the stored format (hash records, a string-only reader)', async () => {
    const { code, output, results, html } = await bench(['--scenarios', 'timers', '--record-format', 'hash'], { BENCH_CALL_READER: 'string-only' });
    const timers = results.find((r) => r.id === 'timers')!;
    expect(timers.invalid?.join('; ') ?? `not INVALID: ${timers.error ?? 'no error'}`, output).toMatch(/call unreadable: WRONGTYPE/);
    expect(timers.invalid?.join('; ')).toMatch(/peak pending \(calls were created\) is 0/);
    expect(output).toMatch(/timers\s+INVALID/);
    // The HTML report says so too.
    expect(html).toMatch(/data-invalid="timers"/);
    expect(html).toMatch(/<tr data-scenario="timers" data-valid="false">/);
    expect(code).toBe(1);
  }, 300_000);
});
