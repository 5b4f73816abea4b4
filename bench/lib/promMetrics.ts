/**
 * Histograms from a server process's Prometheus listener (names as src/observability/metrics.ts
 * registers them): what the server measures of itself, read by the soak and by the call steps'
 * breakdown of the push path.
 */

export interface PromHistogram {
  sumS: number;
  count: number;
  buckets: Map<number, number>;
}

/** A histogram from Prometheus text, summed over its label sets. */
export function promHistogram(text: string, name: string): PromHistogram {
  const h: PromHistogram = { sumS: 0, count: 0, buckets: new Map() };
  for (const m of text.matchAll(new RegExp(`^${name}_(bucket|sum|count)(?:\\{([^}]*)\\})? ([0-9.e+-]+)$`, 'gm'))) {
    const v = Number(m[3]);
    if (m[1] === 'sum') h.sumS += v;
    else if (m[1] === 'count') h.count += v;
    else {
      const le = /le="([^"]+)"/.exec(m[2] ?? '')?.[1] ?? '+Inf';
      const bound = le === '+Inf' ? Infinity : Number(le);
      h.buckets.set(bound, (h.buckets.get(bound) ?? 0) + v);
    }
  }
  return h;
}

/** What `end` counted since `start` (both cumulative). */
export function promDelta(end: PromHistogram, start: PromHistogram | undefined): PromHistogram {
  const buckets = new Map([...end.buckets].map(([le, n]) => [le, n - (start?.buckets.get(le) ?? 0)]));
  return { sumS: end.sumS - (start?.sumS ?? 0), count: end.count - (start?.count ?? 0), buckets };
}

/**
 * The smallest bucket bound that holds 99 % of the observations (ms): the p99 is at most this
 * (Infinity: above the largest finite bucket).
 */
export function p99AtMostMs(h: PromHistogram): number {
  const bounds = [...h.buckets.keys()].sort((a, b) => a - b);
  const bound = bounds.find((le) => (h.buckets.get(le) ?? 0) >= 0.99 * h.count);
  return h.count > 0 && bound !== undefined ? bound * 1000 : NaN;
}


/** The histogram `name` of a process's metrics listener (port from its `listening` line), or undefined without one. */
export async function scrapeHistogram(metricsPort: unknown, name: string): Promise<PromHistogram | undefined> {
  const port = Number(metricsPort);
  if (!port) return undefined;
  try {
    return promHistogram(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), name);
  } catch {
    return undefined;
  }
}
