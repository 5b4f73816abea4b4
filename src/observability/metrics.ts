import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric this server exports starts with this (docs/operations.md "Observability"). */
export const METRIC_PREFIX = 'calling_';

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/** Human time scales: answering and ringing take seconds, not milliseconds. */
const CALL_SECONDS_BUCKETS = [0.5, 1, 2, 3, 5, 8, 13, 20, 30, 45, 60, 90];

/**
 * Prometheus metrics. Counters and histograms on the hot path are updated directly; values
 * that already live elsewhere (open sockets, push outcomes, queue depths, outbox lag) are read
 * at scrape time through `gauge`/`countersFrom`, so there is one source for each number.
 * Call outcomes are counted by the relay as it relays each change (`observeChanges`): every
 * change passes exactly one relay, whichever process made it (API request, ring sweep).
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = this.counter('http_requests_total', 'HTTP requests by route, method and status', ['route', 'method', 'status']);
  readonly httpDuration = this.histogram('http_request_duration_seconds', 'HTTP request latency by route and method', ['route', 'method'], LATENCY_BUCKETS);
  readonly scriptDuration = this.histogram('redis_script_duration_seconds', 'Lua script round-trip latency by script', ['script'], [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25,
  ]);
  readonly ringSweepLateness = this.histogram(
    'ring_sweep_lateness_seconds',
    'How long after its expiresAtMs each unanswered call was ended by a ring sweep',
    [],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  readonly callsCreated = this.counter('calls_created_total', 'Calls created (counted as relayed)', []);
  readonly callsAnswered = this.counter('calls_answered_total', 'Calls answered (counted as relayed)', []);
  readonly callsEnded = this.counter('calls_ended_total', 'Calls ended, by end reason and by which side ended them', ['reason', 'ended_by']);
  readonly answerSeconds = this.histogram('call_answer_seconds', 'From call creation to the accepted answer', [], CALL_SECONDS_BUCKETS);
  readonly ringSeconds = this.histogram(
    'call_ring_seconds',
    'How long calls rang, by how the ringing stopped (answered, or the end reason)',
    ['outcome'],
    CALL_SECONDS_BUCKETS,
  );
  readonly groupCallsCreated = this.counter('group_calls_created_total', 'Group calls created (counted as relayed; docs/group-calls.md)', []);
  readonly groupCallMembers = this.histogram('group_call_members', 'Members a group call rang at its create, besides its caller', [], [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64]);
  readonly groupMemberOutcomes = this.counter('group_call_member_outcomes_total', "Group call members by how the call went for them, counted at its end (joined, declined, missed, busy)", ['outcome']);
  readonly invitationReceiptSeconds = this.histogram(
    'invitation_receipt_seconds',
    "From an invitation to the invitee's first ringing receipt, by how it reached the installation (socket, apns, fcm)",
    ['via'],
    [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60],
  );
  readonly invitationsUnacknowledged = this.counter('invitations_unacknowledged_total', 'Invitees who sent no ringing receipt before the call ended', []);
  readonly relayLag = this.histogram('relay_lag_seconds', 'From a call change (Redis time) to its relay appending the events', [], [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
  ]);
  readonly pushDuration = this.histogram(
    'push_request_duration_seconds',
    'Push provider round trip by provider and result (accepted, invalid-token, retry, misconfigured, rejected)',
    ['provider', 'result'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );
  readonly pushConfigurationErrors = this.counter(
    'push_configuration_errors_total',
    "Pushes a provider refused because of the app's key, topic, project or service account, by provider, app and reason (docs/push-apps.md)",
    ['provider', 'app', 'reason'],
  );
  readonly missedCallPushes = this.counter(
    'missed_call_pushes_total',
    'Missed-call alerts (docs/protocol.md "Missed-call alerts") by platform (ios, android) and result: accepted, invalid-token, retry, misconfigured, rejected per attempt; gave-up when its lifetime ran out in retries; skipped-repeat when a change relayed again planned it again; skipped-seen when its installation rang and saw the end on its socket',
    ['platform', 'result'],
  );

  readonly webhookDuration = this.histogram(
    'webhook_delivery_seconds',
    'Webhook attempts: how long the receiver took to answer, by endpoint',
    ['endpoint'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  readonly webhookDeliveries = this.counter('webhook_deliveries_total', 'Webhook attempts by endpoint and outcome (delivered, retrying, dead, gone, skipped)', ['endpoint', 'outcome']);

  readonly sfuRooms = this.counter('sfu_rooms_total', 'SFU rooms made and removed, by SFU and op (created, destroyed)', ['sfu', 'op']);
  readonly sfuJoins = this.counter('sfu_joins_total', 'SFU credentials issued to call participants (media-session in sfu mode), by SFU', ['sfu']);
  readonly sfuKicks = this.counter('sfu_kicks_total', 'Participants taken out of an SFU room because they left the call or were removed from it, by SFU', ['sfu']);
  readonly sfuErrors = this.counter('sfu_errors_total', 'SFU requests that failed (unreachable, timed out or refused), by SFU and op', ['sfu', 'op']);

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: METRIC_PREFIX });
  }

  /** A gauge whose value is read when Prometheus scrapes. */
  gauge(name: string, help: string, read: () => number | Promise<number>): void {
    new Gauge({
      name: METRIC_PREFIX + name,
      help,
      registers: [this.registry],
      async collect() {
        this.set(await read());
      },
    });
  }

  /** A labelled gauge whose values are read at scrape time. */
  gaugesFrom(name: string, help: string, labelNames: string[], read: () => Iterable<[string[], number]>): void {
    this.readAtScrape(Gauge, name, help, labelNames, read);
  }

  /** A labelled counter whose values are kept elsewhere and read at scrape time. */
  countersFrom(name: string, help: string, labelNames: string[], read: () => Iterable<[string[], number]>): void {
    this.readAtScrape(Counter, name, help, labelNames, read);
  }

  private readAtScrape(type: typeof Gauge | typeof Counter, name: string, help: string, labelNames: string[], read: () => Iterable<[string[], number]>): void {
    const metric: Gauge | Counter = new type({
      name: METRIC_PREFIX + name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        metric.reset();
        for (const [labels, value] of read()) {
          if (metric instanceof Gauge) metric.set(labelsOf(labelNames, labels), value);
          else metric.inc(labelsOf(labelNames, labels), value);
        }
      },
    });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  private counter<L extends string>(name: string, help: string, labelNames: L[]): Counter<L> {
    return new Counter({ name: METRIC_PREFIX + name, help, labelNames, registers: [this.registry] });
  }

  private histogram<L extends string>(name: string, help: string, labelNames: L[], buckets: number[]): Histogram<L> {
    return new Histogram({ name: METRIC_PREFIX + name, help, labelNames, buckets, registers: [this.registry] });
  }
}

function labelsOf(names: string[], values: string[]): Record<string, string> {
  return Object.fromEntries(names.map((l, i) => [l, values[i] ?? '']));
}
