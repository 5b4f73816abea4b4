import WebSocket from 'ws';
import type { EventPayload } from '../../src/events/payloads.js';
import { nowMs } from './clock.js';

/**
 * One device's signaling socket for the generators: the wire format of docs/signaling.md and of
 * the typed client (packages/client/src/signaling.ts), with the `ws` package so that a source address can
 * be chosen (many loopback addresses get past one address's ephemeral ports). No automatic
 * reconnect: a bench must see every close.
 */

export interface DeviceSocketOptions {
  /** ws:// base, e.g. ws://127.0.0.1:8080 */
  wsBase: string;
  token: string;
  localAddress?: string;
  onEvent?: (event: EventPayload, atMs: number) => void;
  /** An in-call message for this installation (docs/signaling.md "In-call messages"). */
  onMessage?: (event: CallMessageEvent, atMs: number) => void;
  /** A live signal of another member (docs/signaling.md "Live signals"). */
  onSignal?: (signal: LiveSignal, atMs: number) => void;
  /** An `error` frame (docs/signaling.md "Server → client frames"), e.g. a refused signal. */
  onError?: (error: ErrorFrame) => void;
  /** A `reply` to one of this socket's command frames not sent with command() (docs/signaling.md "Commands"). */
  onReply?: (reply: CommandReply) => void;
  onClose?: (code: number) => void;
  connectTimeoutMs?: number;
}

/** A `call.message` event, as far as the bench reads it (docs/schemas/call.message.json). */
export interface CallMessageEvent {
  type: 'call.message';
  callId: string;
  eventId: string;
  payload: Record<string, unknown>;
}

/** A `signal` frame's signal (docs/signaling.md "Live signals"). */
export interface LiveSignal {
  callId: string;
  userId: string;
  kind: string;
  value: unknown;
  atMs: number;
}

/** An `error` frame, as far as the bench reads it. */
export interface ErrorFrame {
  type: 'error';
  code: string;
  detail?: { reason?: string; callId?: string; retryAfterMs?: number };
}

/** The answer to a command frame: its HTTP route's status and body. */
export interface CommandReply {
  type: 'reply';
  operationId?: string;
  status: number;
  body: { code?: string } & Record<string, unknown>;
}

export interface DeviceSocket {
  ws: WebSocket;
  /** Sends a command frame (answer, end, rename, message) and resolves with its reply. */
  command(type: string, callId: string, body: { operationId: string } & Record<string, unknown>): Promise<CommandReply>;
  close(): void;
}

/** Opens the socket and resolves once the server said `synced` (live from there). */
export function openDeviceSocket(o: DeviceSocketOptions): Promise<DeviceSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${o.wsBase}/v1/signaling?access_token=${encodeURIComponent(o.token)}`, 'calling.v1.json', {
      perMessageDeflate: false,
      ...(o.localAddress ? { localAddress: o.localAddress } : {}),
    });
    let synced = false;
    /**
     * eventIds that came early, without a cursor (docs/signaling.md "Early events"): their copy
     * from the log, which follows, is not handed on again.
     */
    const early = new Set<string>();
    /** command()s waiting for their reply, by operationId. */
    const waiting = new Map<string, { resolve: (r: CommandReply) => void; reject: (e: Error) => void }>();
    const command: DeviceSocket['command'] = (type, callId, body) =>
      new Promise((res, rej) => {
        waiting.set(body.operationId, { resolve: res, reject: rej });
        ws.send(JSON.stringify({ ...body, type, callId }));
      });
    const timer = setTimeout(() => {
      if (!synced) {
        ws.terminate();
        reject(new Error('signaling connect timed out'));
      }
    }, o.connectTimeoutMs ?? 30_000);
    ws.on('message', (data, isBinary) => {
      const at = nowMs();
      if (isBinary) return;
      let frame: { type?: string; cursor?: string; event?: EventPayload | CallMessageEvent };
      try {
        frame = JSON.parse(String(data)) as typeof frame;
      } catch {
        return;
      }
      if (frame.type === 'event' && frame.event) {
        const event = frame.event as EventPayload;
        if (frame.cursor === undefined) early.add(event.eventId);
        else if (early.delete(event.eventId)) return;
        o.onEvent?.(event, at);
      }
      else if (frame.type === 'message' && frame.event) o.onMessage?.(frame.event as CallMessageEvent, at);
      else if (frame.type === 'signal') o.onSignal?.((frame as unknown as { signal: LiveSignal }).signal, at);
      else if (frame.type === 'error') o.onError?.(frame as unknown as ErrorFrame);
      else if (frame.type === 'reply') {
        const reply = frame as unknown as CommandReply;
        const w = reply.operationId === undefined ? undefined : waiting.get(reply.operationId);
        if (w) {
          waiting.delete(reply.operationId!);
          w.resolve(reply);
        } else o.onReply?.(reply);
      }
      else if (frame.type === 'synced' && !synced) {
        synced = true;
        clearTimeout(timer);
        resolve({ ws, command, close: () => ws.close(1000) });
      }
    });
    ws.on('error', (err) => {
      if (!synced) {
        clearTimeout(timer);
        reject(err);
      }
    });
    ws.on('close', (code) => {
      for (const w of waiting.values()) w.reject(new Error(`signaling socket closed (${code}) before a reply`));
      waiting.clear();
      if (!synced) {
        clearTimeout(timer);
        reject(new Error(`signaling socket closed before synced (${code})`));
      } else o.onClose?.(code);
    });
  });
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i]!, i);
    }
  });
  await Promise.all(workers);
  return out;
}
