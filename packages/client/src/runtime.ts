/**
 * The few globals the client needs, typed here so the package builds without DOM or Node types:
 * browsers and Node 20 both provide fetch, crypto.randomUUID and timers.
 */

export interface FetchResponse {
  status: number;
  ok: boolean;
  text(): Promise<string>;
  /** Read for `retry-after` when present (fetch's Headers). */
  headers?: { get(name: string): string | null };
}

export type FetchLike = (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
) => Promise<FetchResponse>;

interface Globals {
  fetch?: FetchLike;
  WebSocket?: unknown;
  crypto?: { randomUUID(): string };
  process?: { versions?: { node?: string } };
}

const g = globalThis as unknown as Globals;

export function globalFetch(): FetchLike {
  if (!g.fetch) throw new Error('no global fetch: pass `fetch` in the options');
  return g.fetch.bind(globalThis) as FetchLike;
}

export function globalWebSocket(): unknown {
  return g.WebSocket;
}

export function randomId(): string {
  if (!g.crypto) throw new Error('no global crypto.randomUUID: pass operationId and callId explicitly');
  return g.crypto.randomUUID();
}

/** True on Node (where a WebSocket constructor can send headers), false in browsers. */
export function isNode(): boolean {
  return typeof g.process?.versions?.node === 'string';
}
