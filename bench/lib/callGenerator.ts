import { randomUUID } from 'node:crypto';
import type { Socket as UdpSocket } from 'node:dgram';
import type { EventPayload } from '../../src/events/payloads.js';
import { nowMs } from './clock.js';
import type { HistogramSet } from './histogram.js';
import { JsonHttp } from './http.js';
import { registerAndListen, type PushApps, type PushTally } from './pushDevices.js';
import { Rota, runRecorded, startRecord, type InFlight, type InFlightCall, type RecordedRun, type RunRecord } from './lifecycleRun.js';
import { mapLimit, openDeviceSocket, type DeviceSocket } from './signaling.js';
import type { Device } from './users.js';
import { BenchFailure, countInto, type LifecycleCounts } from './waiter.js';

/**
 * What the one-to-one and the group generators (workers/calls.ts, workers/group.ts) hold alike
 * around their own lifecycles: the HTTP pool, a signaling socket per device, the push leg, the
 * rota of parties they call with, and the counts of a run. Each generator keeps only its call
 * state and what its lifecycle awaits.
 */

/** One measured run of a calls or group generator. */
export interface CallsRun {
  label: string;
  rate: number;
  durationMs: number;
  startAtMs: number;
  /** A lifecycle not done after this long counts as a timeout error. */
  timeoutMs: number;
  /** Closed loop instead (lib/openLoop.ts closedLoop): this many in flight, `rate` unused. */
  concurrency?: number;
}

/** What a calls generator counts over a run; a step sums them over its generators (scenarios/callSteps.ts). */
export interface CallCounts extends LifecycleCounts {
  anomalies: Record<string, number>;
  /** Android push signals the fake providers accepted, by event type (expected, not anomalies). */
  pushSignals: Record<string, number>;
  /** Answers by HTTP status (storms, group joins). */
  answers: Record<string, number>;
}

export interface CallsResult extends CallCounts, RecordedRun {}

/** The prefix of the push path's hop histograms: parts of a push step, never a step of their own. */
export const PUSH_HOP = 'push hop:';

/** How long a pair or a group rests between two calls (lib/lifecycleRun.ts Rota). */
export const PAIR_REST_MS = 250;

/** The part of a generator's setup this module uses. */
export interface GeneratorSetup {
  baseUrl: string;
  wsBase: string;
  tag: string;
  gen: number;
  /** Register a push token for the devices `connect` is given (iOS VoIP or Android). */
  push?: PushApps;
  connections?: number;
  localAddress?: string;
}

/** A device to connect, with its socket's event handler. */
export interface SocketOwner {
  d: Device;
  onEvent: (ev: EventPayload, at: number) => void;
}

export class CallGenerator<Party> {
  private s!: GeneratorSetup;
  http!: JsonHttp;
  private readonly sockets = new Map<string, DeviceSocket>();
  private closes = 0;
  private udp: UdpSocket | undefined;
  /** The run's counts, afresh at each run (handlers read them through the generator). */
  anomalies: Record<string, number> = {};
  pushSignals: Record<string, number> = {};
  answers: Record<string, number> = {};
  private readonly rota: Rota<Party>;

  /** `parties` (filled by the generator's setup) are called in rota; `unrested` names a party reused without rest. */
  constructor(parties: readonly Party[], unrested: string) {
    this.rota = new Rota(parties, PAIR_REST_MS, unrested);
  }

  /**
   * Connects the generator: its HTTP pool, a socket per device (64 at a time; one that closes is
   * an error of the run it closes in) and, when push is set up, the `regs` devices' tokens and the
   * fakes' announcements (lib/pushDevices.ts registerAndListen). Resolves with what the setup
   * reports to the orchestrator.
   */
  async connect(s: GeneratorSetup, owners: readonly SocketOwner[], regs: readonly { d: Device; ios: boolean }[], tally: Omit<PushTally, 'count'>) {
    this.s = s;
    const localAddress = s.localAddress ? { localAddress: s.localAddress } : {};
    this.http = new JsonHttp(s.baseUrl, { connections: s.connections ?? 32, timeoutMs: 10_000, ...localAddress });
    await mapLimit(owners, 64, async ({ d, onEvent }) => {
      const socket = await openDeviceSocket({ wsBase: s.wsBase, token: d.token, onEvent, onClose: () => this.closes++, ...localAddress });
      this.sockets.set(d.installationId, socket);
    });
    let registered = 0;
    if (s.push) {
      const leg = await registerAndListen(s.baseUrl, regs, s.push, {
        ...tally,
        count: (into, key) => countInto(into === 'signals' ? this.pushSignals : this.anomalies, key),
      });
      this.udp = leg.udp;
      registered = leg.registered;
    }
    return { sockets: this.sockets.size, pushTokens: registered, udpPort: this.udp?.address().port ?? 0, route: `${s.tag}.${s.gen}` };
  }

  /** The device's socket (commands over the socket). */
  socketOf(d: Device): DeviceSocket {
    return this.sockets.get(d.installationId)!;
  }

  /**
   * One measured run (lib/lifecycleRun.ts runRecorded): the counts start afresh, every party
   * queues again, and `lifecycle` runs each call with the party the rota gives it.
   */
  async run(
    r: CallsRun,
    progress: (data: unknown) => void,
    active: InFlight<InFlightCall>,
    lifecycle: (party: Party, seq: number, scheduledAtMs: number, rec: RunRecord) => Promise<void>,
  ): Promise<CallsResult> {
    this.anomalies = {};
    this.pushSignals = {};
    this.answers = {};
    const rec = startRecord(r.startAtMs, this.anomalies);
    const closesBefore = this.closes;
    this.rota.restart();
    const run = await runRecorded(r, rec, progress, active, (seq, sched) => this.rota.run(seq, sched, rec, (party) => lifecycle(party, seq, sched, rec)), () => this.closes - closesBefore);
    return { ...run, pushSignals: this.pushSignals, answers: this.answers };
  }

  /** The callId of lifecycle `seq`: its scheduled time rides in it, so the push fakes can time the push leg. */
  callId(seq: number, scheduledAtMs: number): string {
    return `${this.s.tag}.${this.s.gen}.${seq}.${Math.round(scheduledAtMs * 1000)}`;
  }

  /**
   * Creates the call (POST /v1/calls, 201 or a failure), timed from its scheduled start as `create`;
   * returns the snapshot's createdAtMs (Redis time, when the create script committed the call and
   * its outbox entry), undefined when the answer has none.
   */
  async create(hist: HistogramSet, token: string, scheduledAtMs: number, body: { callId: string } & Record<string, unknown>): Promise<number | undefined> {
    // The generator's own lateness: a busy generator starts a lifecycle after its scheduled time,
    // and every step of it is timed from that time (the report's push-path breakdown).
    const sentAt = nowMs();
    hist.get(`${PUSH_HOP} scheduled start → create sent`).recordMs(sentAt - scheduledAtMs);
    const created = await this.http.post('/v1/calls', token, { ...body, operationId: randomUUID(), video: false });
    if (created.status !== 201) throw new BenchFailure(`create: HTTP ${created.status}`);
    hist.get('create').recordMs(nowMs() - scheduledAtMs);
    try {
      const at = (JSON.parse(created.text) as { createdAtMs?: unknown }).createdAtMs;
      if (typeof at !== 'number') return undefined;
      hist.get(`${PUSH_HOP} create sent → create committed`).recordMs(at - sentAt);
      return at;
    } catch {
      return undefined;
    }
  }

  async close(): Promise<void> {
    this.udp?.close();
    for (const so of this.sockets.values()) so.close();
    await this.http?.close();
  }
}
