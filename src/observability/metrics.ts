import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics. Counters and histograms on the hot path are updated directly; values
 * that already live elsewhere (open sockets, push outcomes, queue depths, outbox lag) are read
 * at scrape time through `collectors`, so there is one source for each number.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by route and method',
    labelNames: ['route', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly scriptDuration = new Histogram({
    name: 'redis_script_duration_seconds',
    help: 'Lua script round-trip latency by script',
    labelNames: ['script'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25],
    registers: [this.registry],
  });
  readonly ringSweepLateness = new Histogram({
    name: 'ring_sweep_lateness_seconds',
    help: 'How long after its expiresAtMs each unanswered call was ended by a ring sweep',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** A gauge whose value is read when Prometheus scrapes. */
  gauge(name: string, help: string, read: () => number | Promise<number>): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        this.set(await read());
      },
    });
  }

  /** A labelled counter whose values are read at scrape time from a map `labelValue → count`. */
  countersFrom(name: string, help: string, labelNames: string[], read: () => Iterable<[string[], number]>): void {
    new Counter({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [labels, value] of read()) {
          this.inc(Object.fromEntries(labelNames.map((l, i) => [l, labels[i] ?? ''])), value);
        }
      },
    });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
