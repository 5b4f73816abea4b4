import { Packr } from 'msgpackr';

import { SUBPROTOCOL_JSON, SUBPROTOCOL_MSGPACK } from '../contracts/signaling.js';

/**
 * The signaling frame codec (docs/signaling.md): JSON text frames by default; with the
 * `calling.v1.msgpack` subprotocol the same frames as msgpack binary frames. The subprotocol
 * names and close codes are the contract's (contracts/signaling.ts).
 */
export type Encoding = 'json' | 'msgpack';

/** Picks the encoding from the offered subprotocols; returns the one to echo back ('' = none). */
export function negotiate(offered: string): { encoding: Encoding; protocol: string } {
  const list = offered.split(',').map((p) => p.trim());
  if (list.includes(SUBPROTOCOL_MSGPACK)) return { encoding: 'msgpack', protocol: SUBPROTOCOL_MSGPACK };
  if (list.includes(SUBPROTOCOL_JSON)) return { encoding: 'json', protocol: SUBPROTOCOL_JSON };
  return { encoding: 'json', protocol: '' };
}

// Plain maps decode as objects; no record extension so any msgpack decoder reads the frames.
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export type ServerFrame =
  | { type: 'event'; cursor: string; event: unknown }
  | { type: 'gap'; reason: 'trimmed' | 'reset'; cursor: string }
  | { type: 'synced'; cursor: string; reconnectWindowMs?: number }
  | { type: 'pong' }
  | { type: 'error'; code: 'bad_message'; detail: string }
  | { type: 'error'; code: 'signal_refused'; reason: 'not_found' | 'not_joined' | 'rate_limited' | 'unavailable'; callId: string; retryAfterMs?: number; detail: string };

/** An event frame; for JSON the stored payload text is spliced in without re-serialising. */
/** An event frame; without a cursor, an early copy, ahead of the log (docs/signaling.md "Early events"). */
export function encodeEventFrame(encoding: Encoding, cursor: string | undefined, payloadJson: string): string | Uint8Array {
  if (encoding === 'json') {
    return cursor === undefined ? `{"type":"event","event":${payloadJson}}` : `{"type":"event","cursor":"${cursor}","event":${payloadJson}}`;
  }
  return packr.pack(cursor === undefined ? { type: 'event', event: JSON.parse(payloadJson) as unknown } : { type: 'event', cursor, event: JSON.parse(payloadJson) as unknown });
}

/** An in-call message frame (`call.message`, outside the event log: no cursor). */
export function encodeMessageFrame(encoding: Encoding, eventJson: string): string | Uint8Array {
  if (encoding === 'json') return `{"type":"message","event":${eventJson}}`;
  return packr.pack({ type: 'message', event: JSON.parse(eventJson) as unknown });
}

/** A live signal frame (docs/signaling.md "Live signals"): outside the log, no cursor. */
export function encodeSignalFrame(encoding: Encoding, signalJson: string): string | Uint8Array {
  if (encoding === 'json') return `{"type":"signal","signal":${signalJson}}`;
  return packr.pack({ type: 'signal', signal: JSON.parse(signalJson) as unknown });
}

/** A frame as bytes: a text frame's UTF-8. */
export function asBytes(frame: string | Uint8Array): Uint8Array {
  return typeof frame === 'string' ? Buffer.from(frame) : frame;
}

export function encodeFrame(encoding: Encoding, frame: ServerFrame): string | Uint8Array {
  return encoding === 'json' ? JSON.stringify(frame) : packr.pack(frame);
}

/** A client frame as decoded: an object whose `type` names it (docs/signaling.md "Client → server frames"). */
export type ClientFrame = { type?: unknown } & Record<string, unknown>;

/** Decodes a client frame; undefined when it is not an object in the socket's encoding. */
export function decodeClientFrame(encoding: Encoding, data: ArrayBuffer, isBinary: boolean): ClientFrame | undefined {
  let value: unknown;
  try {
    value = encoding === 'msgpack' && isBinary ? packr.unpack(new Uint8Array(data)) : JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as ClientFrame) : undefined;
}

/**
 * The one answer to a command frame: the HTTP route's status and body (a snapshot, a
 * messageSent, or a problem), spliced in as it is for JSON; `retryAfterS` carries what HTTP says
 * in a `retry-after` header.
 */
export function encodeReplyFrame(encoding: Encoding, operationId: string | undefined, status: number, bodyJson: string, retryAfterS: number | undefined): string | Uint8Array {
  if (encoding === 'json') {
    const op = operationId === undefined ? '' : `"operationId":${JSON.stringify(operationId)},`;
    const retry = retryAfterS === undefined ? '' : `,"retryAfterS":${retryAfterS}`;
    return `{"type":"reply",${op}"status":${status},"body":${bodyJson}${retry}}`;
  }
  return packr.pack({ type: 'reply', ...(operationId === undefined ? {} : { operationId }), status, body: JSON.parse(bodyJson) as unknown, ...(retryAfterS === undefined ? {} : { retryAfterS }) });
}
