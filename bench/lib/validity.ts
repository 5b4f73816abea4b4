import { errorList, type ScenarioResult } from './report.js';

/**
 * Whether a scenario's figures can be trusted (bench/README.md "Valid and INVALID runs"). A
 * scenario is INVALID when it failed to run, when a run it means to be within capacity counted
 * errors, or when a count it measured is impossible for what it did (0 pending where calls were
 * created, 0 expiries where calls rang out, 0 throughput): such a figure is a breakage of the
 * bench or of the build, never a measurement. `npm run bench` then exits non-zero.
 */

export interface Checks {
  /** Error counts that must be empty, each with where they were counted. */
  errors?: { where: string; errors: Record<string, number> }[];
  /** Counts that must be above zero (NaN and 0 both make the scenario INVALID). */
  nonZero?: { what: string; n: number | undefined }[];
  /** Other conditions, each with what it says when it does not hold. */
  hold?: { ok: boolean; what: string }[];
}

/** The reasons a scenario is INVALID, from its checks; empty when it is valid. */
export function invalidReasons(c: Checks): string[] {
  const out: string[] = [];
  for (const e of c.errors ?? []) if (Object.keys(e.errors).length > 0) out.push(`errors in ${e.where}: ${errorList(e.errors)}`);
  for (const z of c.nonZero ?? []) if (!(typeof z.n === 'number' && z.n > 0)) out.push(`${z.what} is ${z.n === undefined || Number.isNaN(z.n) ? 'not measured' : z.n}`);
  for (const h of c.hold ?? []) if (!h.ok) out.push(h.what);
  return out;
}

/** A call step (scenarios/callSteps.ts) that must be clean: no errors, every lifecycle complete, a non-zero rate. */
export function cleanStep(where: string, s: { errors: Record<string, number>; started: number; completed: number; achievedRate: number }): Checks {
  return {
    errors: [{ where, errors: s.errors }],
    nonZero: [{ what: `${where}: lifecycles/s`, n: s.achievedRate }],
    hold: [{ ok: s.completed === s.started, what: `${where}: ${s.completed} of ${s.started} lifecycles completed` }],
  };
}

/** Several checks as one. */
export function allOf(...cs: Checks[]): Checks {
  return { errors: cs.flatMap((c) => c.errors ?? []), nonZero: cs.flatMap((c) => c.nonZero ?? []), hold: cs.flatMap((c) => c.hold ?? []) };
}

/** The scenario's reasons, with a failure to run (`error`) first. */
export function reasonsOf(r: ScenarioResult): string[] {
  return [...(r.error ? [`failed to run: ${r.error.split('\n')[0]}`] : []), ...(r.invalid ?? [])];
}

export const isInvalid = (r: ScenarioResult): boolean => reasonsOf(r).length > 0;
