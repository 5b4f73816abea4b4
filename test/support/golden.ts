import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Golden records of wire bodies (test/e2e/one-to-one-golden.test.ts): what each receiver saw,
 * with what legitimately varies between runs replaced by placeholders, serialized one record per
 * line so that a difference reads as a line diff. Key order and every constant value are kept
 * byte for byte: bodies are compared as serialized JSON text, never as parsed objects.
 */

/** One body as one receiver saw it: `at` names the receiver and the request or frame. */
export interface GoldenRecord {
  at: string;
  body: unknown;
}

/** Serializes sections of records: valid JSON, each record compact on its own line. */
export function serializeGolden(sections: Record<string, GoldenRecord[]>): string {
  const parts = Object.entries(sections).map(([name, records]) => `${JSON.stringify(name)}: ${serializeSection(records)}`);
  return `{\n${parts.join(',\n')}\n}\n`;
}

export function serializeSection(records: GoldenRecord[]): string {
  if (records.length === 0) return '[]';
  return `[\n${records.map((r) => `  ${JSON.stringify({ at: r.at, body: r.body })}`).join(',\n')}\n]`;
}

/** The stored golden file's sections, as serialized text per section (so comparisons stay textual). */
export function readGolden(path: string): Record<string, string> | undefined {
  if (!existsSync(path)) return undefined;
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as Record<string, GoldenRecord[]>;
  return Object.fromEntries(Object.entries(parsed).map(([name, records]) => [name, serializeSection(records)]));
}

export function writeGolden(path: string, sections: Record<string, GoldenRecord[]>): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, serializeGolden(sections));
}

/** The names of the call's times, in the order a call may reach them. */
export interface CallTimes {
  [name: string]: number | undefined;
}

/** Epoch milliseconds: anything after 2020 and before 2100 is taken for a time. */
const isEpochMs = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 1_577_836_800_000 && v < 4_102_444_800_000;

const CURSOR = /^[a-z0-9]{1,32}_\d{1,20}-\d{1,20}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const WEBHOOK_ID = /^msg_[A-Za-z0-9_-]{27}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Replaces what varies between runs, for one path (one call) at a time:
 *  - strings given by the test (push tokens) → their names;
 *  - cursors, random UUIDs (in-call message eventIds), webhook-ids → `<cursor:N>`, `<uuid:N>`,
 *    `<webhookId:N>`, numbered by first appearance, so equal values stay visibly equal;
 *  - times → the name of the moment they stand for (`<createdAt>`, `<acceptedAt>`, …): the first
 *    value seen under a name binds it, and a later value under that name that differs shows as
 *    `<name≠>`, so a time that stops matching the moment it names shows in the diff; names
 *    starting with `~` are times of their own (when a push was sent) and never bind;
 *  - durations (`ringingMs`, `talkMs`) → the difference of the call's times they equal.
 * Everything else is kept as it is, keys in their order.
 */
export class Normaliser {
  readonly times: CallTimes = {};
  private readonly numbered = new Map<string, string>();
  private readonly counters = new Map<string, number>();

  constructor(private readonly names: ReadonlyMap<string, string> = new Map()) {}

  /** Binds a time by name (e.g. the create's createdAtMs) before anything is normalised. */
  bind(name: string, value: number | undefined): void {
    if (value !== undefined && this.times[name] === undefined) this.times[name] = value;
  }

  private number(kind: string, value: string): string {
    let p = this.numbered.get(`${kind}\0${value}`);
    if (p === undefined) {
      const n = (this.counters.get(kind) ?? 0) + 1;
      this.counters.set(kind, n);
      p = `<${kind}:${n}>`;
      this.numbered.set(`${kind}\0${value}`, p);
    }
    return p;
  }

  time(value: number, name: string): string {
    if (name.startsWith('~')) return `<${name.slice(1)}>`;
    const bound = this.times[name];
    if (bound === undefined) {
      this.times[name] = value;
      return `<${name}>`;
    }
    return bound === value ? `<${name}>` : `<${name}≠>`;
  }

  private duration(key: string, value: number): unknown {
    const t = this.times;
    const candidates: [string, number | undefined][] =
      key === 'ringingMs'
        ? [
            ['acceptedAt-createdAt', t.acceptedAt !== undefined && t.createdAt !== undefined ? t.acceptedAt - t.createdAt : undefined],
            ['endedAt-createdAt', t.endedAt !== undefined && t.createdAt !== undefined ? t.endedAt - t.createdAt : undefined],
          ]
        : [['endedAt-acceptedAt', t.endedAt !== undefined && t.acceptedAt !== undefined ? t.endedAt - t.acceptedAt : undefined]];
    if (value === 0) return 0;
    // A call answered in the ring window's first millisecond could match both: the first wins.
    for (const [name, v] of candidates) if (v === value) return `<${name}>`;
    return `<${key}≠>`;
  }

  /** The name of the moment a time field stands for, from its key and the event or webhook it is in. */
  private timeName(key: string, ctx: Ctx): string {
    switch (key) {
      case 'createdAtMs':
      case 'acceptedAtMs':
      case 'endedAtMs':
      case 'ringingAtMs':
        return key.slice(0, -2);
      case 'expiresAtMs':
        return ctx.media ? '~mediaExpiresAt' : 'expiresAt';
      case 'issuedAtMs':
        return ctx.push ? '~pushSentAt' : 'createdAt';
      case 'occurredAtMs':
        return eventTime(ctx);
      default:
        return `~${key.slice(0, -2)}`;
    }
  }

  normalise(value: unknown, ctx: Ctx = {}, key = ''): unknown {
    if (typeof value === 'string') {
      // A JSON text inside a body (FCM's data.callpayload): normalised inside, kept as text.
      if (key === 'callpayload' && value.startsWith('{')) return JSON.stringify(this.normalise(JSON.parse(value) as unknown, ctx));
      const named = this.names.get(value);
      if (named !== undefined) return named;
      if (CURSOR.test(value)) return this.number('cursor', value);
      if (UUID.test(value)) return this.number('uuid', value);
      if (WEBHOOK_ID.test(value)) return this.number('webhookId', value);
      if (key === 'timestamp' && ISO.test(value)) return `<iso:${this.time(Date.parse(value), eventTime(ctx)).slice(1, -1)}>`;
      for (const [raw, name] of this.names) if (raw.length >= 8 && value.includes(raw)) return value.split(raw).join(name);
      return value;
    }
    if (typeof value === 'number') {
      if ((key === 'ringingMs' || key === 'talkMs') && Number.isSafeInteger(value)) return this.duration(key, value);
      if (key.endsWith('AtMs') && isEpochMs(value)) return this.time(value, this.timeName(key, ctx));
      return value;
    }
    if (Array.isArray(value)) return value.map((v) => this.normalise(v, ctx, key));
    if (value !== null && typeof value === 'object') {
      const obj = value as Record<string, unknown>;
      const inner: Ctx = { ...ctx };
      if (typeof obj.type === 'string' && obj.type.startsWith('call.')) inner.type = obj.type;
      if (typeof obj.revision === 'string') inner.revision = obj.revision;
      if (typeof obj.reason === 'string') inner.reason = obj.reason;
      // An in-call message, or the reply to one (`{eventId, callId, seq, occurredAtMs}`).
      if (obj.type === 'call.message' || (obj.type === undefined && typeof obj.seq === 'number' && typeof obj.eventId === 'string')) {
        inner.message = String(this.normalise(obj.eventId, ctx, 'eventId')).replace(/^<(.*)>$/, '$1');
      }
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(obj)) out[k] = this.normalise(v, inner, k);
      return out;
    }
    return value;
  }
}

export interface Ctx {
  /** The event or webhook type around the value. */
  type?: string;
  revision?: string;
  /** The end reason of the event around the value. */
  reason?: string;
  /** The in-call message around the value (its eventId). */
  message?: string;
  push?: boolean;
  media?: boolean;
}

function eventTime(ctx: Ctx): string {
  if (ctx.message !== undefined) return `messageAt:${ctx.message}`;
  switch (ctx.type) {
    case 'call.created':
    case 'call.invited':
      return 'createdAt';
    case 'call.accepted':
      return 'acceptedAt';
    case 'call.ended':
      // The other installations are told at the answer that another one took the call.
      return ctx.reason === 'answeredElsewhere' ? 'acceptedAt' : 'endedAt';
    case 'call.renamed':
      return `renamedAt@r${ctx.revision ?? '?'}`;
    case 'call.ringing':
      return 'ringingAt';
    default:
      return `~occurredAt(${ctx.type ?? '?'})`;
  }
}
