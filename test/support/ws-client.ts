import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { unpack } from 'msgpackr';

/**
 * A signaling client for end-to-end tests: connects to GET /v1/signaling with a session token,
 * decodes every server frame (JSON text or msgpack binary), keeps them in arrival order and lets
 * a test wait for the next frame of a type, for a number of events, or for the close.
 */

export type Protocol = 'calling.v1.json' | 'calling.v1.msgpack' | 'none';

export interface Frame {
  type: string;
  [field: string]: unknown;
}

/** A `call.invited` / `call.accepted` / `call.ended` payload as received. */
export interface EventPayload {
  schemaVersion: number;
  eventId: string;
  type: string;
  callId: string;
  revision: string;
  [field: string]: unknown;
}

export interface EventFrame extends Frame {
  type: 'event';
  cursor: string;
  event: EventPayload;
}

export interface CloseInfo {
  code: number;
  reason: string;
}

export interface ConnectOptions {
  /** Resume after this cursor. */
  cursor?: string;
  /** Subprotocol to offer; 'none' offers none (server default: JSON). Default: calling.v1.json. */
  protocol?: Protocol;
  /** How the token travels: `Authorization: Bearer` (default) or `?access_token=`. */
  tokenIn?: 'header' | 'query';
  /** Wait for the `synced` frame before resolving (default true). */
  waitSynced?: boolean;
  /** Timeout for the open (and the `synced` frame). Default 5000 ms. */
  timeoutMs?: number;
  /** A label for error messages. */
  name?: string;
}

export class UpgradeRejected extends Error {
  override name = 'UpgradeRejected';
  constructor(
    readonly status: number,
    readonly body: string,
    readonly headers: Record<string, string | string[] | undefined>,
  ) {
    super(`upgrade refused with HTTP ${status}: ${body}`);
  }
}

/** ws://host:port/v1/signaling?… from the server's base URL (http://… or ws://…). */
export function signalingUrl(baseUrl: string, query: Record<string, string | undefined> = {}): string {
  const u = new URL('/v1/signaling', baseUrl.replace(/^http/, 'ws'));
  for (const [k, v] of Object.entries(query)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}

export class SignalingClient {
  /** Every decoded frame, in arrival order. */
  readonly frames: Frame[] = [];
  /** The raw payload of every frame with whether it was binary (for encoding checks). */
  readonly raw: { data: Buffer; isBinary: boolean }[] = [];
  /** Cursor of the last event, gap or synced frame received. */
  lastCursor: string | undefined;
  /** Resolves when the socket closes (code 1006 when it dropped without a close frame). */
  readonly closed: Promise<CloseInfo>;
  closeInfo: CloseInfo | undefined;
  /** The first frame index `next()` has not yet consumed. */
  private readIndex = 0;
  private readonly waiters = new Set<() => void>();
  private decodeErrors: string[] = [];

  constructor(
    readonly ws: WebSocket,
    readonly name: string,
  ) {
    this.closed = new Promise<CloseInfo>((resolve) => {
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString('utf8') };
        resolve(this.closeInfo);
        this.wake();
      });
    });
    ws.on('message', (data, isBinary) => {
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      this.raw.push({ data: buf, isBinary });
      let frame: Frame;
      try {
        frame = (isBinary ? unpack(buf) : JSON.parse(buf.toString('utf8'))) as Frame;
      } catch (err) {
        this.decodeErrors.push(`${(err as Error).message}: ${buf.toString('hex').slice(0, 80)}`);
        return;
      }
      this.frames.push(frame);
      if ((frame.type === 'event' || frame.type === 'gap' || frame.type === 'synced') && typeof frame.cursor === 'string') {
        this.lastCursor = frame.cursor;
      }
      this.wake();
    });
    // Errors surface through `closed` (1006) and through the waits timing out.
    ws.on('error', () => {});
  }

  /** The negotiated subprotocol ('' when none). */
  get protocol(): string {
    return this.ws.protocol;
  }

  /** Every event frame from the log (with a cursor) received so far. */
  eventFrames(): EventFrame[] {
    return this.frames.filter((f): f is EventFrame => f.type === 'event' && f.cursor !== undefined);
  }

  /** Every early event frame (no cursor, ahead of the log: docs/signaling.md "Early events") received so far. */
  earlyFrames(): Omit<EventFrame, 'cursor'>[] {
    return this.frames.filter((f): f is EventFrame => f.type === 'event' && f.cursor === undefined);
  }

  /** Every event payload from the log received so far. */
  events(): EventPayload[] {
    return this.eventFrames().map((f) => f.event);
  }

  /** Frames that could not be decoded (a test asserts there are none). */
  undecodable(): string[] {
    return [...this.decodeErrors];
  }

  /**
   * The next not yet consumed frame (of `type`, when given; frames of other types before it are
   * consumed too). Rejects after `timeoutMs` or when the socket closes first.
   */
  async next(type?: string, timeoutMs = 3000): Promise<Frame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.readIndex < this.frames.length) {
        const f = this.frames[this.readIndex++]!;
        if (!type || f.type === type) return f;
      }
      if (this.closeInfo) throw new Error(`${this.name}: closed (${this.closeInfo.code} ${this.closeInfo.reason}) before a ${type ?? 'frame'} arrived`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.name}: no ${type ?? 'frame'} within ${timeoutMs} ms; frames: ${this.describe()}`);
      await this.wait(left);
    }
  }

  /** Resolves with all events from the log once at least `n` were received in total; rejects after `timeoutMs`. */
  async waitForEvents(n: number, timeoutMs = 3000): Promise<EventPayload[]> {
    await this.until(() => this.eventFrames().length >= n, timeoutMs, `${n} events`);
    return this.events();
  }

  /** Resolves once `predicate` holds (checked on every frame and on close). */
  async until(predicate: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.name}: ${what} not reached within ${timeoutMs} ms; frames: ${this.describe()}`);
      if (this.closeInfo) throw new Error(`${this.name}: closed (${this.closeInfo.code}) before ${what}; frames: ${this.describe()}`);
      await this.wait(left);
    }
  }

  send(frame: unknown): void {
    this.ws.send(JSON.stringify(frame));
  }

  /**
   * Sends a command frame (docs/signaling.md "Commands") and resolves with the `reply` frame that
   * carries its operationId, without consuming frames for `next()`.
   */
  async command(frame: { type: string; operationId?: unknown } & Record<string, unknown>, timeoutMs = 5000): Promise<Frame> {
    const from = this.frames.length;
    this.send(frame);
    let reply: Frame | undefined;
    await this.until(
      () => (reply = this.frames.slice(from).find((f) => f.type === 'reply' && f.operationId === frame.operationId)) !== undefined,
      timeoutMs,
      `the reply to ${frame.type} ${String(frame.operationId)}`,
    );
    return reply!;
  }

  /** Stops reading from the TCP socket: the kernel buffers fill and the server sees backpressure. */
  pauseReading(): void {
    this.tcp().pause();
  }

  resumeReading(): void {
    this.tcp().resume();
  }

  /** The client end's TCP port. */
  get localPort(): number {
    return this.tcp().localPort!;
  }

  /** Closes (1000) and waits for the close to finish. */
  async close(): Promise<void> {
    if (this.closeInfo) return;
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000);
    const timer = setTimeout(() => this.ws.terminate(), 1000);
    await this.closed;
    clearTimeout(timer);
  }

  /** Short description of what was received, for failure messages. */
  describe(): string {
    return JSON.stringify(
      this.frames.map((f) =>
        f.type === 'event'
          ? { type: f.cursor === undefined ? 'early event' : 'event', event: `${(f as EventFrame).event.type}/${String((f as EventFrame).event.reason ?? '')}` }
          : { type: f.type },
      ),
    );
  }

  private tcp(): Socket {
    const s = (this.ws as unknown as { _socket?: Socket })._socket;
    if (!s) throw new Error(`${this.name}: no underlying socket`);
    return s;
  }

  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}

/**
 * Opens a signaling WebSocket. Resolves once it is open and (unless `waitSynced: false`) the
 * server sent `synced`; rejects with `UpgradeRejected` when the upgrade gets an HTTP response.
 */
export async function connect(baseUrl: string, token: string | undefined, opts: ConnectOptions = {}): Promise<SignalingClient> {
  const tokenIn = opts.tokenIn ?? 'header';
  const url = signalingUrl(baseUrl, {
    cursor: opts.cursor,
    access_token: tokenIn === 'query' ? token : undefined,
  });
  const protocol = opts.protocol ?? 'calling.v1.json';
  const headers: Record<string, string> = {};
  if (token !== undefined && tokenIn === 'header') headers.authorization = `Bearer ${token}`;
  const ws = protocol === 'none' ? new WebSocket(url, { headers }) : new WebSocket(url, protocol, { headers });
  const client = new SignalingClient(ws, opts.name ?? 'client');
  const timeoutMs = opts.timeoutMs ?? 5000;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`${client.name}: no open within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.once('open', () => {
      clearTimeout(timer);
      resolve();
    });
    ws.once('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        reject(new UpgradeRejected(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'), res.headers));
        ws.terminate();
      });
    });
    ws.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
  if (opts.waitSynced ?? true) await client.next('synced', timeoutMs);
  return client;
}

/** The outcome of an upgrade attempt that is expected to be refused. */
export async function upgradeStatus(baseUrl: string, token: string | undefined, opts: ConnectOptions = {}): Promise<UpgradeRejected | SignalingClient> {
  try {
    return await connect(baseUrl, token, { ...opts, waitSynced: false });
  } catch (err) {
    if (err instanceof UpgradeRejected) return err;
    throw err;
  }
}

/** Closes every client, ignoring ones already closed. */
export async function closeAll(clients: Iterable<SignalingClient>): Promise<void> {
  await Promise.all([...clients].map((c) => c.close().catch(() => {})));
}
