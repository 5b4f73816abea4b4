import { Packr } from 'msgpackr';
import type { EventPayload } from '../events/payloads.js';

/**
 * A signaling client with automatic resume: it reconnects with backoff after any close,
 * resuming from the last cursor it processed, and drops repeated events by eventId.
 * Works with the browser's WebSocket or the `ws` package (pass it as `WebSocket`).
 */

interface MinimalWebSocket {
  binaryType: string;
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}
type WebSocketCtor = new (url: string, protocols?: string | string[], options?: unknown) => MinimalWebSocket;
/**
 * What the `WebSocket` option accepts: the browser's WebSocket or the `ws` package's class. Kept
 * loose on purpose: their handler and options types differ from MinimalWebSocket's in ways that
 * do not matter at run time, and strict TypeScript would otherwise refuse `ws`.
 */
type AnyWebSocketClass = new (url: string, protocols?: string | string[], options?: any) => object;

export interface SignalingOptions {
  /** ws:// or wss:// base, e.g. ws://127.0.0.1:8080 */
  url: string;
  token: string | (() => string | Promise<string>);
  cursor?: string;
  encoding?: 'json' | 'msgpack';
  WebSocket?: AnyWebSocketClass;
  /** Extra constructor options for the `ws` package (e.g. localAddress). */
  wsOptions?: unknown;
  onEvent: (event: EventPayload, cursor: string) => void;
  /** Events were lost (log trimmed or reset): refetch the calls you know of. */
  onGap?: (reason: 'trimmed' | 'reset', cursor: string) => void;
  onSynced?: (cursor: string) => void;
  onClose?: (code: number, reason: string) => void;
  /** Reconnect after a close (default true). */
  reconnect?: boolean;
  maxBackoffMs?: number;
  /** How many recent eventIds to remember for deduplication. */
  dedupeWindow?: number;
}

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export class SignalingClient {
  private ws: MinimalWebSocket | undefined;
  private stopped = false;
  private attempt = 0;
  private readonly seen = new Set<string>();
  private lastCursor: string | undefined;
  private openedResolve: (() => void) | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly opts: SignalingOptions) {
    this.lastCursor = opts.cursor;
  }

  get cursor(): string | undefined {
    return this.lastCursor;
  }

  /** Connects; resolves once the server said `synced` (replay done, live from here). */
  start(): Promise<void> {
    this.stopped = false;
    return new Promise((resolve) => {
      this.openedResolve = resolve;
      void this.connect();
    });
  }

  stop(): void {
    this.stopped = true;
    // A reconnect may be scheduled (backoff) or under way (awaiting the token): cancel both.
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.ws?.close(1000, 'client stopped');
  }

  ping(): void {
    this.sendFrame({ type: 'ping' });
  }

  private async connect(): Promise<void> {
    const Ctor = (this.opts.WebSocket ?? (globalThis as unknown as { WebSocket: WebSocketCtor }).WebSocket) as WebSocketCtor;
    const token = typeof this.opts.token === 'function' ? await this.opts.token() : this.opts.token;
    if (this.stopped) return;
    const q = new URLSearchParams({ access_token: token });
    if (this.lastCursor) q.set('cursor', this.lastCursor);
    const protocol = this.opts.encoding === 'msgpack' ? 'calling.v1.msgpack' : 'calling.v1.json';
    const ws = new Ctor(`${this.opts.url}/v1/signaling?${q}`, protocol, this.opts.wsOptions);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onmessage = (ev) => this.onFrame(ev.data);
    ws.onerror = () => {};
    ws.onclose = (ev) => {
      this.opts.onClose?.(ev.code, ev.reason);
      if (this.stopped || this.opts.reconnect === false) return;
      const delay = Math.min(this.opts.maxBackoffMs ?? 10_000, 100 * 2 ** this.attempt++) * (0.5 + Math.random() / 2);
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = undefined;
        void this.connect();
      }, delay);
    };
  }

  private onFrame(data: unknown): void {
    let frame: { type: string; cursor?: string; event?: EventPayload; reason?: 'trimmed' | 'reset' };
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
        const ev = frame.event!;
        this.lastCursor = frame.cursor;
        if (this.seen.has(ev.eventId)) return;
        this.remember(ev.eventId);
        this.opts.onEvent(ev, frame.cursor!);
        return;
      }
      case 'gap':
        this.lastCursor = frame.cursor;
        this.opts.onGap?.(frame.reason!, frame.cursor!);
        return;
      case 'synced':
        this.lastCursor = frame.cursor;
        this.attempt = 0;
        this.opts.onSynced?.(frame.cursor!);
        this.openedResolve?.();
        this.openedResolve = undefined;
        return;
    }
  }

  private remember(eventId: string): void {
    this.seen.add(eventId);
    if (this.seen.size > (this.opts.dedupeWindow ?? 1000)) {
      const oldest = this.seen.values().next().value;
      if (oldest !== undefined) this.seen.delete(oldest);
    }
  }

  private sendFrame(frame: object): void {
    if (!this.ws || this.ws.readyState !== 1) return;
    this.ws.send(this.opts.encoding === 'msgpack' ? packr.pack(frame) : JSON.stringify(frame));
  }
}
