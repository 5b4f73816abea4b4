import type { BenchContext } from '../lib/context.js';
import { allOf, cleanStep, invalidReasons } from '../lib/validity.js';
import { errorList, fmtMs, fmtNum, fmtRate, latencyTable, mdTable, ratio, type ScenarioResult } from '../lib/report.js';
import { costSummary, runCallStep, startCallsPool } from './callSteps.js';

/**
 * Answer storms: every callee has several devices, and each device answers the moment it rings,
 * so every call sees that many concurrent answer claims. Exactly one must win (200); every other
 * must get 409 `answer_conflict` with the snapshot, and then `call.ended answeredElsewhere` on
 * its socket; the caller gets one `call.accepted`.
 */
export async function stormScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const z = ctx.opts.sizes.storm;
  // A storm call costs about (2 + devices) lifecycles' worth of requests: run at a rate the
  // server carries (half the sustained lifecycle rate found in this run, at most the configured).
  const found = ctx.findings.sustainedLifecycleRate;
  const rate = found ? Math.max(5, Math.min(z.rate, Math.round(found / 2))) : z.rate;
  const rateNote = found ? `half the lifecycle rate found in this run (${fmtRate(found)}), at most ${fmtRate(z.rate)}` : 'the configured rate (no lifecycle rate found in this run)';
  const pool = await startCallsPool(ctx, z.pairsPerGenerator, z.devices);
  try {
    ctx.log(`  ${z.devices} devices per callee, ${fmtRate(rate)} calls (${rateNote}) for ${z.durationMs / 1000} s (${fmtRate(rate * z.devices)} answer claims)`);
    const r = await runCallStep(ctx, pool, { label: 'storm', rate, durationMs: z.durationMs, p99LimitMs: ctx.opts.p99LimitMs, timeoutMs: ctx.opts.sizes.lifecycle.timeoutMs });
    ctx.log(`  storm: ${r.pass ? 'PASS' : 'FAIL'} ${fmtRate(r.achievedRate)} calls, answers ${errorList(r.answers)}, errors ${errorList(r.errors)}; ${r.boundBy}`);
    const answersPerSecond = r.achievedRate * z.devices;
    const redisCeiling = ctx.ceilings.redis?.lifecycle;
    const httpCeiling = ctx.ceilings.http?.requestsPerSecond;
    const wins = r.answers['200'] ?? 0;
    const conflicts = r.answers['409'] ?? 0;
    const httpPerSecond = r.achievedRate * (2 + z.devices);
    const md = [
      `${z.devices} devices per callee, every one answering as soon as its \`call.invited\` arrives; ${fmtRate(rate)} calls for ${z.durationMs / 1000} s (open loop; ${rateNote}). ` +
        `Checked per call: exactly one 200, every other claim 409 \`answer_conflict\` with a snapshot, \`call.accepted\` on the caller's socket, ` +
        `\`call.ended answeredElsewhere\` on every losing device, then \`call.ended remoteEnded\` on the winner after the caller hangs up.`,
      '',
      mdTable(
        ['calls done', 'answer claims', '200 (winners)', '409 (conflicts)', 'errors', 'calls/s', 'answer claims/s', 'generator CPU', 'result'],
        [[`${fmtNum(r.completed)}/${fmtNum(r.started)}`, fmtNum(wins + conflicts), fmtNum(wins), fmtNum(conflicts), errorList(r.errors), fmtRate(r.achievedRate), fmtRate(answersPerSecond), `${(r.generator.maxShare * 100).toFixed(0)}%`, r.pass ? 'pass' : 'FAIL']],
      ),
      '',
      latencyTable(r.latency),
      '',
      `Ratios: ${ratio(r.achievedRate, redisCeiling)} of the Redis-bound lifecycle ceiling; ${ratio(httpPerSecond, httpCeiling)} of the raw uWS HTTP ceiling (${2 + z.devices} requests per call).`,
      '',
      `Bound: ${r.boundBy}.`,
      '',
      `Cost: ${costSummary(r)}`,
      '',
      `Anomalies: ${errorList(r.anomalies)}. Android push signals accepted by the fake FCM (expected: \`call.ended answeredElsewhere\` to the losing Android devices): ${errorList(r.pushSignals)}.`,
    ].join('\n');
    const elsewhere = r.latency['answer → answeredElsewhere (ws)'];
    return {
      id: 'storm',
      title: `Answer storms (${z.devices} devices per call)`,
      headlines: [
        {
          metric: `storm calls/s (${z.devices} concurrent answers each), errors`,
          value: `${fmtRate(r.achievedRate)}, ${Object.keys(r.errors).length ? errorList(r.errors) : '0 errors'}`,
          ceiling: redisCeiling ? `Redis-bound ${fmtRate(redisCeiling)}` : 'n/a',
          ratio: ratio(r.achievedRate, redisCeiling),
          bound: r.boundBy,
        },
        {
          metric: 'answer claim p99 / answeredElsewhere p99',
          value: `${fmtMs(r.latency['answer']?.p99 ?? NaN)} / ${fmtMs(elsewhere?.p99 ?? NaN)}`,
          ceiling: httpCeiling ? `raw uWS ${fmtRate(httpCeiling)}` : 'n/a',
          ratio: `${ratio(httpPerSecond, httpCeiling)} (HTTP req/s)`,
        },
      ],
      goals: [],
      markdown: md,
      data: r,
      invalid: invalidReasons(
        allOf(cleanStep('the storm', r), {
          hold: [
            { ok: wins === r.completed, what: `${fmtNum(wins)} winning answers for ${fmtNum(r.completed)} calls (exactly one each)` },
          ],
        }),
      ),
    };
  } finally {
    await pool.close();
  }
}
