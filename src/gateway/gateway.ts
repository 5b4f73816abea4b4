import type { TemplatedApp } from 'uWebSockets.js';
import type { RedisClient } from '../redis/connection.js';
import type { EventLog } from '../events/eventLog.js';
import { SIGN_OUT_EPOCH, type LiveMessage } from '../events/eventLog.js';
import { EARLY_EPOCH } from '../events/earlyNotice.js';
import { compareStreamIds, decodeCursor, encodeCursor, type Cursor } from '../events/cursor.js';
import { isForInstallation } from '../events/delivery.js';
import type { AuthGuard } from '../auth/guard.js';
import { TokenBucket } from '../limits/rateLimiter.js';
import { CALL_COMMANDS } from '../commands/callCommands.js';
import type { CallCommand, CommandDeps } from '../commands/command.js';
import type { Logger } from '../util/logger.js';
import { CLOSE } from '../contracts/signaling.js';
import { LiveSubscriptions } from './liveSubscriptions.js';
import { commandReply } from './commandFrames.js';
import { upgradeHandler } from './upgrade.js';
import { sendSignalFrame, type SignalSender } from './signals.js';
import { SIGNAL_EPOCH } from './signalNotice.js';
import type { GatewaySettings, GatewayStats, RefusedSocketData, Socket, SocketData } from './socket.js';
import { Admission } from './admission.js';
import { missedEndIn, type MissedCallSeen } from '../push/missedCallSeen.js';
import {
  decodeClientFrame,
  encodeEventFrame,
  encodeFrame,
  encodeMessageFrame,
  encodeReplyFrame,
  encodeSignalFrame,
  asBytes,
  type ClientFrame,
  type Encoding,
  type ServerFrame,
} from './protocol.js';

/**
 * The signaling gateway at GET /v1/signaling. A device connects with its session token (header or
 * `access_token` query parameter) and optionally `cursor`; the gateway replays the device's
 * events after the cursor from its event log, then delivers live events in log order. Delivery
 * per socket is a small state machine: `syncing` (reading the log, buffering live messages) and
 * `live` (sending live messages while they continue the log without a hole; on a hole it goes
 * back to syncing from its cursor). On a single Redis a live socket also gets a change's events
 * early, without a cursor, from the script that made the change (onEarly).
 */

/** Calls a socket follows by early notices; past this the oldest falls back to the relay's copies. */
const MAX_EARLY_CALLS = 8;

export class Gateway {
  /** The sockets this gateway holds, by user, with their users' live subscriptions. */
  private readonly live: LiveSubscriptions<Socket>;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** New sockets per second (WS_ADMISSIONS_PER_S). */
  readonly admission: Admission;
  readonly stats: GatewayStats = { eventsSent: 0, earlyEventsSent: 0, slowConsumersClosed: 0, tokensExpired: 0, rateLimited: 0, messagesSent: 0, signalsSent: 0, signalsRefused: 0, commands: new Map() };

  constructor(
    subscriber: RedisClient,
    private readonly eventLog: EventLog,
    private readonly auth: AuthGuard,
    private readonly logger: Logger,
    private readonly settings: GatewaySettings,
    /** What the command frames run with: the same as their HTTP routes. */
    private readonly commands: CommandDeps,
    private readonly signals: SignalSender,
    private readonly missedCallSeen?: Pick<MissedCallSeen, 'noteEndSeen'>,
  ) {
    this.admission = new Admission(settings.admissionsPerS);
    this.live = new LiveSubscriptions<Socket>(
      subscriber,
      settings,
      (ws, msg) => this.onLive(ws, msg),
      (failed) => {
        for (const ws of this.live.sockets()) {
          // A socket whose user is not subscribed would miss its events: the device reconnects
          // (with backoff) and subscribes anew.
          if (failed.has(ws.getUserData().userId)) this.failSocket(ws, new Error('live subscription refused after a resubscription'));
          else this.resync(ws);
        }
      },
    );
  }

  mount(app: TemplatedApp): void {
    app.ws<SocketData>('/v1/signaling', {
      // uWebSockets.js drops a frame over this without a close frame (1006), so its bound sits
      // above ours: a frame over WS_MAX_MESSAGE_BYTES is closed by us with 1009 (message()).
      maxPayloadLength: transportFrameLimit(this.settings.maxMessageBytes),
      maxBackpressure: this.settings.maxBackpressureBytes,
      idleTimeout: this.settings.idleTimeoutS,
      sendPingsAutomatically: true,
      upgrade: upgradeHandler({ auth: this.auth, admission: this.admission, logger: this.logger, settings: this.settings, socketsOf: (userId) => this.live.socketsOf(userId) }),
      open: (ws) => this.onOpen(ws),
      message: (ws, message, isBinary) => this.onMessage(ws, message, isBinary),
      close: (ws, code) => this.onClose(ws, code),
    });
  }

  /** A socket past its upgrade: its replay from the cursor starts. */
  private onOpen(ws: Socket): void {
    const data = ws.getUserData();
    if ('retryAfterMs' in data) {
      ws.end(CLOSE.tryAgainLater, `server busy; retry after ${(data as RefusedSocketData).retryAfterMs} ms`);
      return;
    }
    this.logger.debug({ userId: data.userId, installationId: data.installationId, encoding: data.encoding }, 'socket open');
    void this.start(ws);
  }

  /** A client frame: a ping, or a command (runCommand); anything else is answered with an error frame. */
  private onMessage(ws: Socket, message: ArrayBuffer, isBinary: boolean): void {
    const data = ws.getUserData();
    if (message.byteLength > this.settings.maxMessageBytes) {
      data.closed = true;
      ws.end(CLOSE.tooBig, 'frame too large');
      return;
    }
    if (this.settings.messagesPer10s > 0) {
      // Created on the first message, so idle sockets carry no bucket.
      data.messages ??= new TokenBucket({ limit: this.settings.messagesPer10s, windowMs: 10_000 });
      if (!data.messages.take().allowed) {
        this.stats.rateLimited++;
        data.closed = true;
        ws.end(CLOSE.rateLimited, 'too many messages; reconnect after a pause');
        return;
      }
    }
    const frame = decodeClientFrame(data.encoding, message, isBinary);
    if (frame?.type === 'ping') {
      this.send(ws, { type: 'pong' });
      return;
    }
    if (frame?.type === 'signal') {
      void this.sendSignal(ws, frame);
      return;
    }
    const command = typeof frame?.type === 'string' ? CALL_COMMANDS.get(frame.type) : undefined;
    if (!frame || !command) {
      this.send(ws, { type: 'error', code: 'bad_message', detail: `expected {"type":"ping"} or a command frame (${[...CALL_COMMANDS.keys()].join(', ')})` });
      return;
    }
    void this.runCommand(ws, command, frame);
  }

  private onClose(ws: Socket, code: number): void {
    const data = ws.getUserData();
    this.logger.debug({ userId: data.userId, installationId: data.installationId, code }, 'socket closed');
    data.closed = true;
    data.pending = undefined;
    this.live.remove(data.userId, ws);
  }

  /**
   * A command frame (docs/signaling.md "Commands"): the frame is the HTTP route's body plus
   * `type` and `callId`, run by the route's own handler; answered with one `reply` frame carrying
   * the route's status and body.
   */
  private async runCommand(ws: Socket, command: CallCommand, frame: ClientFrame): Promise<void> {
    const data = ws.getUserData();
    const reply = await commandReply(this.commands, data, command, frame, this.logger);
    const counter = `${command.name} ${reply.status}`;
    this.stats.commands.set(counter, (this.stats.commands.get(counter) ?? 0) + 1);
    const operationId = typeof frame.operationId === 'string' ? frame.operationId : undefined;
    const retryAfter = reply.headers?.['retry-after'];
    this.sendRaw(ws, encodeReplyFrame(data.encoding, operationId, reply.status, reply.body ?? '{}', retryAfter === undefined ? undefined : Number(retryAfter)));
  }

  /** A live signal (docs/signaling.md "Live signals"): no reply when sent; an `error` frame when refused. */
  private async sendSignal(ws: Socket, frame: ClientFrame): Promise<void> {
    const answer = await sendSignalFrame(this.signals, ws.getUserData(), frame, this.logger);
    if (answer?.code === 'signal_refused') this.stats.signalsRefused++;
    if (answer) this.send(ws, answer);
  }

  /** Starts the token-expiry sweep (one timer for all sockets instead of one per socket). */
  startSweeps(intervalMs = 1000): void {
    this.sweepTimer = setInterval(() => {
      const nowS = Date.now() / 1000;
      for (const ws of this.live.sockets()) {
        if (ws.getUserData().expiresAtS <= nowS) {
          this.stats.tokensExpired++;
          ws.end(CLOSE.tokenExpired, 'token expired; reconnect with a fresh token and your cursor');
        }
      }
    }, intervalMs);
    this.sweepTimer.unref();
  }

  /** Closes every socket with 1001 and a reconnect hint. */
  closeAll(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    for (const ws of [...this.live.sockets()]) ws.end(CLOSE.goingAway, 'server shutting down; reconnect with your cursor');
  }

  openSockets(): number {
    return this.live.size();
  }

  /** Open sockets by wire encoding (metrics), counted when asked rather than kept on every open. */
  openSocketsByEncoding(): Map<Encoding, number> {
    const counts = new Map<Encoding, number>([
      ['json', 0],
      ['msgpack', 0],
    ]);
    for (const ws of this.live.sockets()) {
      const e = ws.getUserData().encoding;
      counts.set(e, (counts.get(e) ?? 0) + 1);
    }
    return counts;
  }

  private async start(ws: Socket): Promise<void> {
    const data = ws.getUserData();
    try {
      // Subscribe first so nothing published during the log read is missed.
      await this.live.add(data.userId, ws);
      if (data.closed) return;
      await this.sync(ws, data.startCursor);
      data.startCursor = undefined;
    } catch (err) {
      this.failSocket(ws, err);
    }
  }

  /** Reads the log after the socket's cursor until caught up, then replays buffered live messages. */
  private async sync(ws: Socket, from: Cursor | undefined): Promise<void> {
    const data = ws.getUserData();
    data.pending ??= [];
    let cursor = from;
    for (;;) {
      const page = await this.eventLog.read(data.userId, data.installationId, cursor, this.settings.readBatch);
      if (data.closed) return;
      if (page.kind === 'gap') {
        const head = decodeCursor(page.nextCursor)!;
        this.send(ws, { type: 'gap', reason: page.reason, cursor: page.nextCursor });
        cursor = head;
        break;
      }
      ws.cork(() => {
        for (const e of page.events) this.sendEvent(ws, e.cursor, e.json, e.only);
      });
      cursor = decodeCursor(page.nextCursor)!;
      if (!page.more || data.closed) break;
    }
    if (data.closed) return;
    data.epoch = cursor.epoch;
    data.lastId = cursor.id;
    const pending = data.pending ?? [];
    data.pending = undefined;
    const reconnectWindowMs = this.admission.reconnectWindowMs(this.live.size());
    this.send(ws, { type: 'synced', cursor: encodeCursor(cursor), ...(reconnectWindowMs > 0 ? { reconnectWindowMs } : {}) });
    for (const msg of pending) this.onLive(ws, msg);
  }

  private onLive(ws: Socket, msg: LiveMessage): void {
    const data = ws.getUserData();
    if (data.closed) return;
    if (msg.epoch === SIGN_OUT_EPOCH) {
      if (isForInstallation(msg.only || undefined, undefined, data.installationId)) ws.end(CLOSE.signedOut, 'signed out by the app; do not reconnect with this session');
      return;
    }
    if (msg.epoch === EARLY_EPOCH) {
      this.onEarly(ws, msg);
      return;
    }
    if (msg.epoch === SIGNAL_EPOCH) {
      // A live signal: outside the log, sent at once even while syncing, never buffered.
      if (isForInstallation(msg.only || undefined, undefined, data.installationId)) {
        this.stats.signalsSent++;
        // A notice's signal is encoded once per encoding for all its recipients here: uWebSockets.js
        // sends bytes as they are, where a string is converted again for every socket.
        if (msg.frames) this.sendRaw(ws, (msg.frames[data.encoding] ??= asBytes(encodeSignalFrame(data.encoding, msg.json))), data.encoding === 'msgpack');
        else this.sendRaw(ws, encodeSignalFrame(data.encoding, msg.json));
      }
      return;
    }
    if (msg.id === '') {
      // An in-call message: outside the log, so neither buffered nor checked for holes; sent at
      // once, in the order the relay published it (docs/signaling.md "In-call messages").
      if (isForInstallation(msg.only || undefined, undefined, data.installationId)) {
        this.stats.messagesSent++;
        this.sendRaw(ws, encodeMessageFrame(data.encoding, msg.json));
      }
      return;
    }
    if (data.pending) {
      data.pending.push(msg);
      return;
    }
    if (msg.epoch === data.epoch && compareStreamIds(msg.id, data.lastId) <= 0) return; // already passed
    if (msg.epoch !== data.epoch || msg.previousId !== data.lastId) {
      // A hole (a missed message, or the log was reset): read it from the log instead.
      this.resync(ws);
      return;
    }
    data.lastId = msg.id;
    if (isForInstallation(msg.only || undefined, msg.except || undefined, data.installationId)) {
      this.sendEvent(ws, encodeCursor({ epoch: msg.epoch, id: msg.id }), msg.json, msg.only);
    }
  }

  /**
   * A change's events ahead of the relay's copies (docs/signaling.md "Early events"). Each call's
   * events must still reach the socket in revision order, counting each eventId where it first
   * arrives. A call's early notices come in change order (all on its shard's early channel, over
   * the connection of the user's channel, so each before the relay's copy), so the socket sends
   * one only when it had the call's previous early notice (of revision - 1), from the call's creation
   * on: then every earlier event of the call for this socket was sent before it, early or from the
   * log. A socket that joined during a call, lost notices (a resubscription, a hole) or was syncing
   * gets that call's events from the relay's copies alone.
   */
  private onEarly(ws: Socket, msg: LiveMessage): void {
    const data = ws.getUserData();
    if (data.pending) return;
    const early = msg.early;
    if (!early) return;
    const calls = data.earlyCalls;
    if (early.revision === 1) {
      const started = (data.earlyCalls ??= new Map());
      started.set(early.callId, 1);
      if (started.size > MAX_EARLY_CALLS) started.delete(started.keys().next().value!);
    } else if (calls?.get(early.callId) === early.revision - 1) {
      if (!early.ended) calls.set(early.callId, early.revision);
      else if (calls.delete(early.callId) && calls.size === 0) data.earlyCalls = undefined;
    } else {
      return;
    }
    for (const e of early.events) {
      if (!isForInstallation(e.only, e.except, data.installationId)) continue;
      this.stats.earlyEventsSent++;
      this.sendEvent(ws, undefined, e.json, e.only);
    }
  }

  private resync(ws: Socket): void {
    const data = ws.getUserData();
    // Early notices may have been lost with what made the socket resync.
    data.earlyCalls = undefined;
    if (data.closed || data.pending) return;
    this.sync(ws, data.epoch ? { epoch: data.epoch, id: data.lastId } : undefined).catch((err: unknown) => this.failSocket(ws, err));
  }

  /**
   * `cursor` undefined: an early copy, ahead of the log. `only`: whom the event was for. An end
   * that makes the user miss the call is marked seen for the installation (src/push/missedCallSeen.ts).
   */
  private sendEvent(ws: Socket, cursor: string | undefined, json: string, only: string | undefined): void {
    const data = ws.getUserData();
    if (data.closed) return;
    this.stats.eventsSent++;
    this.sendRaw(ws, encodeEventFrame(data.encoding, cursor, json));
    if (!this.missedCallSeen || data.closed) return;
    const end = missedEndIn(json, only);
    if (end) this.missedCallSeen.noteEndSeen(data.userId, end.callId, data.installationId, end.revision);
  }

  private send(ws: Socket, frame: ServerFrame): void {
    const data = ws.getUserData();
    if (data.closed) return;
    this.sendRaw(ws, encodeFrame(data.encoding, frame));
  }

  /** Sends `frame`: a binary frame for bytes unless `binary` says otherwise (a text frame's UTF-8). */
  private sendRaw(ws: Socket, frame: string | Uint8Array, binary = typeof frame !== 'string'): void {
    const data = ws.getUserData();
    if (data.closed) return;
    // Close before the buffer goes over the limit: past it uWS drops every send, the close
    // frame included, and the device would see an abnormal close (1006) instead of 4008.
    const buffered = ws.getBufferedAmount();
    // The frame's size matters only when something is already queued (the usual case is not).
    if (buffered > 0 && buffered + (typeof frame === 'string' ? Buffer.byteLength(frame) : frame.byteLength) > this.settings.maxBackpressureBytes) {
      data.closed = true;
      this.stats.slowConsumersClosed++;
      ws.end(CLOSE.slowConsumer, 'slow consumer; reconnect and resume from your cursor');
      return;
    }
    const status = ws.send(frame, binary);
    // 2 = dropped because the send buffer is full: this socket would miss an event, so close
    // it; the device reconnects and resumes from its cursor.
    if (status === 2 && !data.closed) {
      data.closed = true;
      this.stats.slowConsumersClosed++;
      ws.end(CLOSE.slowConsumer, 'slow consumer; reconnect and resume from your cursor');
    }
  }

  private failSocket(ws: Socket, err: unknown): void {
    const data = ws.getUserData();
    if (data.closed) return;
    this.logger.warn({ err: (err as Error).message, userId: data.userId }, 'signaling sync failed; closing socket');
    ws.end(1011, 'temporary failure; reconnect with your cursor');
  }
}

/** The frame size uWebSockets.js itself enforces: well above WS_MAX_MESSAGE_BYTES (see mount). */
export function transportFrameLimit(maxMessageBytes: number): number {
  return Math.max(4 * maxMessageBytes, 64 * 1024);
}
