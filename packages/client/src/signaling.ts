import { Packr } from 'msgpackr';
import { globalFetch, globalWebSocket, isNode, type FetchLike } from './runtime.js';
import { EventFilter } from './eventFilter.js';
import { backoffDelay } from './backoff.js';
import type { CallMessage, CommandReply, EventPayload, GapReason, LiveSignal, SignalBody, SignalRefusal } from './types.js';

/**
 * The signaling client (docs/signaling.md): it connects to /v1/signaling, hands each new event to
 * `onEvent`, and after a close reconnects with exponential backoff and full jitter, resuming from
 * the last cursor it processed (an event's, or a `synced` or `gap` frame's). After every `synced`
 * it fetches the in-call messages of the calls it follows from the highest seq it holds without
 * a gap (docs/devices.md "In-call messages"). Repeated eventIds and stale revisions are dropped (EventFilter). A rejected token
 * (401/403 at the upgrade, or an expired static token) stops it and asks `onAuthFailure` for a new
 * one instead of retrying the same token.
 */

interface MinimalWebSocket {
  binaryType: string;
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: { message?: string }) => void) | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}
type WebSocketCtor = new (url: string, protocols?: string | string[], options?: unknown) => MinimalWebSocket;
/**
 * What the `WebSocket` option accepts: the browser's WebSocket or the `ws` package's class. Kept
 * loose on purpose: their handler and option types differ from MinimalWebSocket's in ways that do
 * not matter at run time, and strict TypeScript would otherwise refuse `ws`.
 */
export type AnyWebSocketClass = new (url: string, protocols?: string | string[], options?: any) => object;

/** Why the server refused the session token. */
export interface AuthFailure {
  /** 401: missing, invalid or expired token; 403: the token may not do this. */
  status: 401 | 403;
  /** What was seen: the upgrade's HTTP status, or the close code (4001 token expired). */
  detail: string;
}

/** start() rejects with this when the token was refused and no new token was given. */
export class SignalingAuthError extends Error {
  override name = 'SignalingAuthError';
  constructor(readonly failure: AuthFailure) {
    super(`signaling token refused (${failure.status}): ${failure.detail}`);
  }
}

export interface SignalingOptions {
  /** ws:// or wss:// base, e.g. wss://calls.example.com */
  url: string;
  /** The session token, or a function returning the current one (called before each connect). */
  token: string | (() => string | Promise<string>);
  /** Resume after this cursor; without it the server starts at the head (no history). */
  cursor?: string;
  encoding?: 'json' | 'msgpack';
  /** A WebSocket class; defaults to the global one (browsers, Node 22+). On Node pass `ws`. */
  WebSocket?: AnyWebSocketClass;
  /** Extra constructor options for the `ws` package (e.g. localAddress). */
  wsOptions?: Record<string, unknown>;
  /**
   * Where the token goes: an `Authorization` header (only a Node WebSocket class such as `ws`
   * can send one) or the `access_token` query parameter (browsers). Default: header on Node
   * with an injected class, query otherwise.
   */
  tokenIn?: 'header' | 'query';
  /**
   * A new event, once: repeats (the log's copy of an event that came early, a replay) are dropped.
   * `cursor` is the one to store once you processed it; for an event that came early it is the
   * cursor before it, and onCursor gives the one after it when the log's copy arrives.
   */
  onEvent: (event: EventPayload, cursor: string) => void;
  /** The cursor moved past an event already handed on (its copy from the log): store it as onEvent's. */
  onCursor?: (cursor: string) => void;
  /**
   * Every cursor to keep, as it moves: after an event handed to onEvent, the log's copy of an
   * early event, a `synced` frame and a `gap` frame. Store the last one (the app's storage) and
   * pass it as `cursor` when the app starts again: a device that received no event resumes
   * from its `synced` cursor.
   */
  saveCursor?: (cursor: string) => void;
  /** An in-call message from the other party (repeated eventIds dropped). */
  onMessage?: (message: CallMessage) => void;
  /** Another joined member's live signal (docs/signaling.md "Live signals"): at most once, never replayed. */
  onSignal?: (signal: LiveSignal) => void;
  /** A signal of yours the server dropped: not joined, no such call, or over the call's limit. */
  onSignalRefused?: (refusal: SignalRefusal) => void;
  /** Events were lost (log trimmed or reset): refetch the calls you know of. */
  onGap?: (reason: GapReason, cursor: string) => void;
  /** The replay is done, live from here (at start, after each reconnect, and after a resync on an open socket). */
  onSynced?: (cursor: string) => void;
  /** The socket closed (docs/signaling.md "Close codes"); the client reconnects unless stopped or refused. */
  onClose?: (code: number, reason: string) => void;
  /**
   * The token was refused. Return a new token to reconnect with it, or nothing to stay stopped
   * (start() then rejects with SignalingAuthError). Without this option the client stays stopped.
   */
  onAuthFailure?: (failure: AuthFailure) => string | undefined | Promise<string | undefined>;
  /** Reconnect after a close (default true). */
  reconnect?: boolean;
  /**
   * Reconnect attempt n (from 0; back to 0 once synced) waits a random time between
   * `minBackoffMs` (default 0) and min(`maxBackoffMs` (default 10 000), 250 ms × 2^n): full jitter.
   * A close with 1013 (the gateway is admitting sockets at its limit) waits the time its reason
   * gives instead, plus up to a tenth of it (at most 250 ms) of jitter, and does not count as an
   * attempt. After a close without a close frame (1006: the gateway crashed), the first attempt
   * waits a random time within the last `synced` frame's `reconnectWindowMs`, when it had one.
   */
  maxBackoffMs?: number;
  minBackoffMs?: number;
  /**
   * Where the client fetches missed in-call messages (GET /v1/calls/{id}/messages). A
   * CallingClient given this signaling client sets it; set it yourself otherwise.
   */
  fetchMessages?: (callId: string, afterSeq: number) => Promise<{ messages: CallMessage[] }>;
  /** A fetch of missed in-call messages failed; the next `synced` (or recoverMessages) retries it. */
  onError?: (err: Error) => void;
  /** How many recent eventIds (and calls' revisions) to remember. */
  dedupeWindow?: number;
  /** start() rejects (and the client stops) when not synced within this time; default 30 000. */
  startTimeoutMs?: number;
  /** Used in browsers to tell a refused token from a network failure; defaults to global fetch. */
  fetch?: FetchLike | ((url: string, init: never) => Promise<unknown>);
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/**
 * The socket could not carry a command (not open, closed before the reply, or no reply in time):
 * the command may or may not have run. Retry it with the same operationId, over HTTP or once the
 * socket is back; the retry returns the original outcome.
 */
export class SignalingUnavailableError extends Error {
  override name = 'SignalingUnavailableError';
}

interface PendingCommand {
  resolve: (reply: CommandReply) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
  ws: MinimalWebSocket;
}

interface PendingStart {
  resolve: () => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** One installation's signaling socket (docs/signaling.md): events, in-call messages and command frames, resumed by cursor. */
export class SignalingClient {
  private ws: MinimalWebSocket | undefined;
  private stopped = true;
  private attempt = 0;
  private readonly filter: EventFilter;
  private lastCursor: string | undefined;
  private pending: PendingStart | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  /** The last `synced` frame's `reconnectWindowMs` (0: none): the first reconnect's window after a crash. */
  private reconnectWindowMs = 0;
  private token: SignalingOptions['token'];
  /** A token from onAuthFailure, used for the next connection only when `token` is a function. */
  private nextToken: string | undefined;
  /** Commands sent and not yet answered, by operationId. */
  private readonly commands = new Map<string, PendingCommand>();
  /** The calls whose in-call messages are followed: the seqs held (MessageSeqs), by callId. */
  private readonly followed = new Map<string, MessageSeqs>();
  /** Calls a `call.ended` event stopped following: a late message does not follow them again. */
  private readonly ended = new Set<string>();
  private fetchMessages: SignalingOptions['fetchMessages'];

  constructor(private readonly opts: SignalingOptions) {
    this.lastCursor = opts.cursor;
    this.token = opts.token;
    this.filter = new EventFilter(opts.dedupeWindow ?? 1000);
    this.fetchMessages = opts.fetchMessages;
  }

  /** Sets where missed in-call messages are fetched from, unless the options named it. */
  useMessageSource(fetchMessages: NonNullable<SignalingOptions['fetchMessages']>): void {
    this.fetchMessages ??= fetchMessages;
  }

  /**
   * Follows a call's in-call messages (docs/api.md "In-call messages"): after every `synced` (a
   * reconnect, or a resync on an open socket) the client fetches the messages after the highest
   * seq it holds without a gap and hands the new ones to onMessage, in seq order. A message
   * received for a call follows it too; a `call.ended` event, or unfollowMessages, stops it.
   * `heldSeq`: the highest seq without a gap the app already holds (after an app kill).
   */
  followMessages(callId: string, heldSeq = 0): void {
    const seqs = this.followed.get(callId);
    if (seqs) seqs.hold(heldSeq);
    else this.followed.set(callId, new MessageSeqs(heldSeq));
  }

  /** Stops following a call's in-call messages. */
  unfollowMessages(callId: string): void {
    this.followed.delete(callId);
  }

  /** The highest seq of a followed call held without a gap: the `afterSeq` to fetch from. */
  heldMessageSeq(callId: string): number | undefined {
    return this.followed.get(callId)?.contiguous;
  }

  /** Fetches a followed call's missed messages now (e.g. after a network change); resolves once delivered. */
  recoverMessages(callId: string): Promise<void> {
    const seqs = this.followed.get(callId);
    if (!seqs || !this.fetchMessages) return Promise.resolve();
    const fetchMessages = this.fetchMessages;
    // One fetch at a time per call; a fetch asked for while one runs goes after it, from the seq then held.
    seqs.fetching = seqs.fetching.then(async () => {
      if (this.followed.get(callId) !== seqs) return;
      const { messages } = await fetchMessages(callId, seqs.contiguous);
      for (const m of [...messages].sort((a, b) => a.seq - b.seq)) this.deliverMessage(m);
    });
    return seqs.fetching.catch((err: unknown) => {
      seqs.fetching = Promise.resolve();
      throw err;
    });
  }

  private recoverAll(): void {
    for (const callId of this.followed.keys()) {
      this.recoverMessages(callId).catch((err: unknown) => this.opts.onError?.(err instanceof Error ? err : new Error(String(err))));
    }
  }

  private deliverMessage(message: CallMessage): void {
    if (!this.followed.has(message.callId) && !this.ended.has(message.callId)) {
      this.followed.set(message.callId, new MessageSeqs(0));
      while (this.followed.size > (this.opts.dedupeWindow ?? 1000)) this.followed.delete(this.followed.keys().next().value as string);
    }
    this.followed.get(message.callId)?.add(message.seq);
    if (this.filter.accept(message)) this.opts.onMessage?.(message);
  }

  private stopFollowing(callId: string): void {
    this.followed.delete(callId);
    this.ended.add(callId);
    while (this.ended.size > (this.opts.dedupeWindow ?? 1000)) this.ended.delete(this.ended.values().next().value as string);
  }

  private moveCursor(cursor: string | undefined): void {
    if (cursor === undefined || cursor === this.lastCursor) return;
    this.lastCursor = cursor;
    this.opts.saveCursor?.(cursor);
  }

  /** The cursor the next connection resumes from: the last one handed to saveCursor. */
  get cursor(): string | undefined {
    return this.lastCursor;
  }

  /**
   * Connects; resolves once the server said `synced` (replay done, live from here). Always
   * settles: rejects with SignalingAuthError when the token is refused and no new one is given,
   * with an Error when stop() is called first or startTimeoutMs passes.
   */
  start(): Promise<void> {
    if (this.pending) return this.pendingPromise!;
    if (!this.stopped) return Promise.resolve(); // already running and synced
    this.stopped = false;
    this.attempt = 0;
    this.pendingPromise = new Promise<void>((resolve, reject) => {
      const timeoutMs = this.opts.startTimeoutMs ?? 30_000;
      const timer = setTimeout(() => this.halt(new Error(`signaling: not synced within ${timeoutMs} ms`)), timeoutMs);
      this.pending = { resolve, reject, timer };
    });
    void this.connect();
    return this.pendingPromise;
  }
  private pendingPromise: Promise<void> | undefined;

  /** Closes the socket (1000) and stops reconnecting; a pending start() rejects. */
  stop(): void {
    this.halt(new Error('signaling: stopped before synced'));
  }

  /** Sends a `ping` frame; the server answers `pong`. */
  ping(): void {
    this.sendFrame({ type: 'ping' });
  }

  /**
   * Sends a live signal to the other joined members of the call (docs/signaling.md "Live
   * signals"): fire and forget, at most once; dropped when the socket is not open (a signal is
   * stale a moment later: after a reconnect, send the current state again). A refusal comes
   * back through onSignalRefused.
   */
  signal(callId: string, body: SignalBody): boolean {
    if (!this.isOpen) return false;
    this.sendFrame({ type: 'signal', callId, kind: body.kind, value: body.value });
    return true;
  }

  /** Whether the socket is open: commands can go over it. */
  get isOpen(): boolean {
    return this.ws?.readyState === 1;
  }

  /**
   * Sends a call command as a frame (docs/signaling.md "Commands": `answer`, `end`, `rename`,
   * `message`, `invite`, `ringing`; `body` is its HTTP route's body) and resolves with the reply:
   * its route's status and body, a problem included. Rejects with SignalingUnavailableError when
   * the socket is not open, closes before the reply, or no reply comes within `timeoutMs`.
   */
  command(type: string, callId: string, body: { operationId: string } & Record<string, unknown>, timeoutMs = 10_000): Promise<CommandReply> {
    const ws = this.ws;
    const op = body.operationId;
    if (!ws || ws.readyState !== 1) return Promise.reject(new SignalingUnavailableError('signaling: the socket is not open'));
    if (this.commands.has(op)) return Promise.reject(new Error(`signaling: a command with operationId ${op} is already waiting for its reply`));
    return new Promise<CommandReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.commands.delete(op);
        reject(new SignalingUnavailableError(`signaling: no reply to ${type} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.commands.set(op, { resolve, reject, timer, ws });
      this.sendFrame({ ...body, type, callId });
    });
  }

  /** Rejects the commands sent on `ws`, which closed before their replies. */
  private failCommands(ws: MinimalWebSocket): void {
    for (const [op, c] of this.commands) {
      if (c.ws !== ws) continue;
      this.commands.delete(op);
      clearTimeout(c.timer);
      c.reject(new SignalingUnavailableError('signaling: the socket closed before the reply'));
    }
  }

  private halt(reason: Error): void {
    this.stopped = true;
    // A reconnect may be scheduled (backoff) or under way (awaiting the token): cancel both.
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.ws?.close(1000, 'client stopped');
    this.settle(reason);
  }

  private settle(error?: Error): void {
    const p = this.pending;
    if (!p) return;
    this.pending = undefined;
    this.pendingPromise = undefined;
    clearTimeout(p.timer);
    if (error) p.reject(error);
    else p.resolve();
  }

  private async currentToken(): Promise<string> {
    if (this.nextToken !== undefined) {
      const t = this.nextToken;
      this.nextToken = undefined;
      return t;
    }
    return typeof this.token === 'function' ? await this.token() : this.token;
  }

  private async connect(): Promise<void> {
    const Ctor = (this.opts.WebSocket ?? globalWebSocket()) as WebSocketCtor | undefined;
    if (!Ctor) {
      this.halt(new Error('no global WebSocket: pass the `ws` package as the WebSocket option'));
      return;
    }
    let token: string;
    try {
      token = await this.currentToken();
    } catch (err) {
      this.halt(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (this.stopped) return;
    const inHeader = (this.opts.tokenIn ?? (this.opts.WebSocket && isNode() ? 'header' : 'query')) === 'header';
    const q = new URLSearchParams();
    if (!inHeader) q.set('access_token', token);
    if (this.lastCursor) q.set('cursor', this.lastCursor);
    const qs = q.toString();
    const protocol = this.opts.encoding === 'msgpack' ? 'calling.v1.msgpack' : 'calling.v1.json';
    const options = inHeader
      ? { ...this.opts.wsOptions, headers: { ...(this.opts.wsOptions?.['headers'] as object | undefined), authorization: `Bearer ${token}` } }
      : this.opts.wsOptions;
    const ws = new Ctor(`${this.opts.url.replace(/\/+$/, '')}/v1/signaling${qs ? `?${qs}` : ''}`, protocol, options);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    let opened = false;
    let errorMessage = '';
    ws.onopen = () => {
      opened = true;
    };
    ws.onmessage = (ev) => this.onFrame(ev.data);
    ws.onerror = (ev) => {
      errorMessage = typeof ev?.message === 'string' ? ev.message : '';
    };
    ws.onclose = (ev) => {
      if (this.ws === ws) this.ws = undefined;
      this.failCommands(ws);
      this.opts.onClose?.(ev.code, ev.reason);
      if (this.stopped) return;
      void this.afterClose(ev.code, ev.reason, opened, errorMessage, token);
    };
  }

  private async afterClose(code: number, reason: string, opened: boolean, errorMessage: string, token: string): Promise<void> {
    const failure = await this.authFailure(code, reason, opened, errorMessage, token);
    if (this.stopped) return;
    if (failure) {
      let fresh: string | undefined;
      try {
        fresh = await this.opts.onAuthFailure?.(failure);
      } catch {
        fresh = undefined;
      }
      if (this.stopped) return;
      if (!fresh) {
        this.halt(new SignalingAuthError(failure));
        return;
      }
      if (typeof this.token === 'string') this.token = fresh;
      else this.nextToken = fresh;
      void this.connect();
      return;
    }
    if (this.opts.reconnect === false) {
      this.halt(new Error(`signaling: closed ${code} ${reason}`));
      return;
    }
    const retryAfterMs = code === TRY_AGAIN_LATER ? retryAfterOf(reason) : undefined;
    // A gateway that died (no close frame) after saying how wide its devices should spread.
    const window = code === ABNORMAL && this.attempt === 0 ? this.reconnectWindowMs : 0;
    let delay: number;
    if (retryAfterMs !== undefined) delay = retryAfterMs + Math.random() * Math.min(250, retryAfterMs / 10);
    else if (window > 0) {
      delay = Math.random() * window;
      this.attempt++;
    } else delay = backoffDelay(this.attempt++, { baseMs: 250, minMs: this.opts.minBackoffMs ?? 0, maxMs: this.opts.maxBackoffMs ?? 10_000 });
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, delay);
  }

  /**
   * Whether a close means the token was refused. An expired token (4001) counts only when the
   * token is a fixed string: a token function is asked for a fresh one on the next connect. A
   * refused upgrade shows as 1006: `ws` names the HTTP status in its error; a browser hides it,
   * so the token is checked with one HTTP request.
   */
  private async authFailure(code: number, reason: string, opened: boolean, errorMessage: string, token: string): Promise<AuthFailure | undefined> {
    if (code === 4001) return typeof this.token === 'string' ? { status: 401, detail: `closed 4001: ${reason}` } : undefined;
    if (opened) return undefined;
    const m = /Unexpected server response: (\d{3})/.exec(errorMessage);
    if (m) {
      const status = Number(m[1]);
      return status === 401 || status === 403 ? { status, detail: `upgrade answered ${status}` } : undefined;
    }
    return this.probeToken(token);
  }

  private async probeToken(token: string): Promise<AuthFailure | undefined> {
    let fetchImpl: FetchLike;
    try {
      fetchImpl = (this.opts.fetch as FetchLike | undefined) ?? globalFetch();
    } catch {
      return undefined;
    }
    const base = this.opts.url.replace(/^ws/, 'http').replace(/\/+$/, '');
    try {
      const res = await fetchImpl(`${base}/v1/call-events`, { method: 'GET', headers: { authorization: `Bearer ${token}` } });
      await res.text().catch(() => '');
      return res.status === 401 || res.status === 403 ? { status: res.status, detail: `token check answered ${res.status}` } : undefined;
    } catch {
      return undefined; // the server is unreachable: an ordinary reconnect
    }
  }

  private onFrame(data: unknown): void {
    let frame: {
      type: string;
      cursor?: string;
      event?: EventPayload;
      reason?: GapReason;
      operationId?: string;
      status?: number;
      body?: unknown;
      retryAfterS?: number;
      reconnectWindowMs?: number;
      signal?: LiveSignal;
      code?: string;
    } & Partial<Omit<SignalRefusal, 'reason'>>;
    try {
      frame =
        typeof data === 'string'
          ? JSON.parse(data)
          : (packr.unpack(data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array)) as typeof frame);
    } catch {
      return;
    }
    switch (frame.type) {
      case 'event': {
        // Without a cursor, an early copy (docs/signaling.md "Early events"): handed on at once with
        // the cursor so far (resuming from it replays the event from the log, where the filter
        // drops it); its copy from the log follows with its cursor, and only the cursor is handed on.
        const before = this.lastCursor;
        if (frame.cursor !== undefined) this.lastCursor = frame.cursor;
        if (!frame.event) return;
        if (frame.event.type === 'call.ended') this.stopFollowing(frame.event.callId);
        if (this.filter.accept(frame.event)) this.opts.onEvent(frame.event, this.lastCursor ?? '');
        else if (frame.cursor !== undefined) this.opts.onCursor?.(frame.cursor);
        if (this.lastCursor !== undefined && this.lastCursor !== before) this.opts.saveCursor?.(this.lastCursor);
        return;
      }
      case 'gap':
        this.moveCursor(frame.cursor);
        this.opts.onGap?.(frame.reason!, frame.cursor!);
        return;
      case 'message': {
        const message = frame.event as unknown as CallMessage | undefined;
        if (message) this.deliverMessage(message);
        return;
      }
      case 'signal':
        if (frame.signal) this.opts.onSignal?.(frame.signal);
        return;
      case 'error':
        if (frame.code === 'signal_refused' && frame.callId !== undefined) {
          const refusal: SignalRefusal = { callId: frame.callId, reason: frame.reason as unknown as SignalRefusal['reason'], detail: frame.detail ?? '' };
          if (frame.retryAfterMs !== undefined) refusal.retryAfterMs = frame.retryAfterMs;
          this.opts.onSignalRefused?.(refusal);
        }
        return;
      case 'reply': {
        const pending = frame.operationId === undefined ? undefined : this.commands.get(frame.operationId);
        if (!pending) return;
        this.commands.delete(frame.operationId!);
        clearTimeout(pending.timer);
        pending.resolve({ status: frame.status!, body: frame.body, ...(frame.retryAfterS === undefined ? {} : { retryAfterS: frame.retryAfterS }) });
        return;
      }
      case 'synced':
        this.moveCursor(frame.cursor);
        this.attempt = 0;
        this.reconnectWindowMs = typeof frame.reconnectWindowMs === 'number' ? frame.reconnectWindowMs : 0;
        this.opts.onSynced?.(frame.cursor!);
        this.settle();
        this.recoverAll();
        return;
    }
  }

  private sendFrame(frame: object): void {
    if (!this.ws || this.ws.readyState !== 1) return;
    this.ws.send(this.opts.encoding === 'msgpack' ? packr.pack(frame) : JSON.stringify(frame));
  }
}

/**
 * The seqs of one call's in-call messages held by this installation: `contiguous` is the highest
 * seq held with every seq below it (the sender counts from 1), `above` the seqs held past a gap.
 * Fetching after `contiguous`, not after the highest seq held, recovers a message missed while a
 * later one arrived live (docs/api.md "In-call messages").
 */
class MessageSeqs {
  contiguous: number;
  private readonly above = new Set<number>();
  fetching: Promise<void> = Promise.resolve();

  constructor(held: number) {
    this.contiguous = held;
  }

  hold(held: number): void {
    if (held > this.contiguous) this.contiguous = held;
    this.advance();
  }

  add(seq: number): void {
    if (seq <= this.contiguous) return;
    this.above.add(seq);
    this.advance();
    if (this.above.size > 10_000) this.above.clear(); // bounded: a gap that never fills is refetched past
  }

  private advance(): void {
    for (const s of this.above) if (s <= this.contiguous) this.above.delete(s);
    while (this.above.delete(this.contiguous + 1)) this.contiguous++;
  }
}

/** The close code of a gateway admitting sockets at its limit (docs/signaling.md "Close codes"). */
const TRY_AGAIN_LATER = 1013;
/** No close frame: the gateway crashed or the network dropped. */
const ABNORMAL = 1006;

/** The wait a 1013 close's reason names (`… retry after <ms> ms`), if any. */
export function retryAfterOf(reason: string): number | undefined {
  const m = /retry after (\d+) ms/.exec(reason);
  return m ? Number(m[1]) : undefined;
}
