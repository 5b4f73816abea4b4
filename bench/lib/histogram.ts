/**
 * A small HDR-style latency histogram: log-linear buckets (64 linear sub-buckets per power of
 * two, so every recorded value is kept within ~1.6 %), values in microseconds, mergeable across
 * processes through a compact serialised form. Min, max, count and sum are exact.
 */

const SUB_BITS = 6;
const SUB = 1 << SUB_BITS; // 64
const MAX_EXP = 40; // 2^40 µs ≈ 12.7 days: nothing we measure is longer
const SIZE = (MAX_EXP - SUB_BITS + 1) * SUB + SUB;

function indexOf(v: number): number {
  if (v < SUB) return v;
  const e = Math.floor(Math.log2(v));
  const exp = Math.min(e, MAX_EXP);
  const sub = Math.floor(v / 2 ** (exp - SUB_BITS)) - SUB; // 0..63
  return (exp - SUB_BITS + 1) * SUB + Math.min(sub, SUB - 1);
}

/** The value in the middle of a bucket (its lower bound for the exact small ones). */
function valueAt(index: number): number {
  if (index < SUB) return index;
  const exp = Math.floor(index / SUB) - 1 + SUB_BITS;
  const sub = index % SUB;
  const width = 2 ** (exp - SUB_BITS);
  return (SUB + sub) * width + (width - 1) / 2;
}

export interface SerializedHistogram {
  /** [bucket index, count] pairs for the non-empty buckets. */
  b: [number, number][];
  count: number;
  sumUs: number;
  minUs: number;
  maxUs: number;
}

export interface HistogramSummary {
  count: number;
  /** All in milliseconds. */
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export class Histogram {
  private counts = new Float64Array(SIZE);
  count = 0;
  sumUs = 0;
  minUs = Infinity;
  maxUs = 0;

  /** Records a latency given in milliseconds (fractions kept to the microsecond). */
  recordMs(ms: number): void {
    this.recordUs(Math.max(0, Math.round(ms * 1000)));
  }

  recordUs(us: number): void {
    this.counts[indexOf(us)]! += 1;
    this.count++;
    this.sumUs += us;
    if (us < this.minUs) this.minUs = us;
    if (us > this.maxUs) this.maxUs = us;
  }

  merge(other: Histogram | SerializedHistogram): this {
    const h = other instanceof Histogram ? other.serialize() : other;
    for (const [i, c] of h.b) this.counts[i]! += c;
    this.count += h.count;
    this.sumUs += h.sumUs;
    if (h.count > 0) {
      this.minUs = Math.min(this.minUs, h.minUs);
      this.maxUs = Math.max(this.maxUs, h.maxUs);
    }
    return this;
  }

  /** The value (ms) at quantile q in [0, 1]; the exact max for q = 1. */
  quantileMs(q: number): number {
    if (this.count === 0) return 0;
    if (q >= 1) return this.maxUs / 1000;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < SIZE; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(valueAt(i), this.maxUs) / 1000;
    }
    return this.maxUs / 1000;
  }

  summary(): HistogramSummary {
    return {
      count: this.count,
      mean: this.count ? this.sumUs / this.count / 1000 : 0,
      p50: this.quantileMs(0.5),
      p95: this.quantileMs(0.95),
      p99: this.quantileMs(0.99),
      max: this.count ? this.maxUs / 1000 : 0,
    };
  }

  serialize(): SerializedHistogram {
    const b: [number, number][] = [];
    for (let i = 0; i < SIZE; i++) if (this.counts[i]) b.push([i, this.counts[i]!]);
    return { b, count: this.count, sumUs: this.sumUs, minUs: this.count ? this.minUs : 0, maxUs: this.maxUs };
  }

  static from(s: SerializedHistogram): Histogram {
    return new Histogram().merge(s);
  }
}

/** A named set of histograms (one per lifecycle step), serialisable as a plain object. */
export class HistogramSet {
  readonly map = new Map<string, Histogram>();

  get(name: string): Histogram {
    let h = this.map.get(name);
    if (!h) this.map.set(name, (h = new Histogram()));
    return h;
  }

  serialize(): Record<string, SerializedHistogram> {
    const out: Record<string, SerializedHistogram> = {};
    for (const [k, h] of this.map) out[k] = h.serialize();
    return out;
  }

  mergeSerialized(s: Record<string, SerializedHistogram>): this {
    for (const [k, h] of Object.entries(s)) this.get(k).merge(h);
    return this;
  }

  summaries(order?: readonly string[]): Record<string, HistogramSummary> {
    const out: Record<string, HistogramSummary> = {};
    const names = order ? [...order.filter((n) => this.map.has(n)), ...[...this.map.keys()].filter((n) => !order.includes(n))] : [...this.map.keys()];
    for (const n of names) out[n] = this.map.get(n)!.summary();
    return out;
  }
}
