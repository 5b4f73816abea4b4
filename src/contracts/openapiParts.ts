import { z } from 'zod';
import * as s from '../commands/schemas.js';
import { errorCatalogue, PROBLEM_TYPE_BASE, type ErrorCode } from '../commands/errors.js';

/** The building blocks of the OpenAPI document (openapi.ts, openapiServer.ts): schemas, examples, problems. */

export function schema(t: z.ZodType, io: 'input' | 'output' = 'output'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(t, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

/**
 * The schema with each named property forbidden (the `false` schema): a property one body of a
 * `oneOf` refuses, so no object matches two bodies and a generated client can tell them apart
 * (the one-to-one and the group create, docs/group-calls.md). zod's `z.undefined()` is shown as
 * `{}` (anything), which would say the opposite.
 */
export function forbidding(body: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  const properties = { ...(body.properties as Record<string, unknown>) };
  for (const name of names) properties[name] = false;
  return { ...body, properties };
}

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

export function json(name: string, examples: Record<string, { summary: string; value: unknown }>): Record<string, unknown> {
  return { 'application/json': { schema: ref(name), examples } };
}

// Examples (each one valid against its schema: the linters check).
export const CALL_ID = '3f1c9a52-7d1e-4f0e-9b8a-2c6d5e4f7a10';
export const T0 = 1795236718009;
export const RINGING = {
  schemaVersion: 1,
  callId: CALL_ID,
  revision: '1',
  state: 'ringing',
  caller: { userId: 'alice', displayName: 'Alice', handle: 'app:alice' },
  calleeUserId: 'bob',
  createdAtMs: T0,
  expiresAtMs: T0 + 45_000,
  video: false,
};
export const ACCEPTED = { ...RINGING, revision: '2', state: 'accepted', answeredByInstallationId: 'bob-phone', acceptedAtMs: T0 + 70 };
export const ENDED = { ...ACCEPTED, revision: '3', state: 'ended', endedAtMs: T0 + 60_000, endReason: 'localHangup' };
export const INVITED_EVENT = {
  schemaVersion: 1,
  type: 'call.invited',
  callId: CALL_ID,
  displayName: 'Alice',
  handle: 'app:alice',
  eventId: `${CALL_ID}:1:invited`,
  revision: '1',
  issuedAtMs: T0,
  expiresAtMs: T0 + 45_000,
  video: false,
};
export const ENDED_EVENT = { schemaVersion: 1, eventId: `${CALL_ID}:3:remote`, type: 'call.ended', callId: CALL_ID, revision: '3', occurredAtMs: T0 + 60_000, reason: 'remoteEnded' };
export const CURSOR = 'mhx2k9c1a7f3qz_1795236718009-0';
export const snapshotExamples = (summary: string, value: unknown) => ({ snapshot: { summary, value } });

/** Problem responses for `codes`, grouped by status, each code with an example body. */
export function problems(...codes: ErrorCode[]): Record<string, unknown> {
  const out: Record<string, { description: string; content: Record<string, { schema: unknown; examples: Record<string, unknown> }> }> = {};
  for (const code of codes) {
    const { status, title } = errorCatalogue[code];
    const key = String(status);
    const entry = (out[key] ??= {
      description: '',
      content: { 'application/problem+json': { schema: ref('Problem'), examples: {} } },
    });
    entry.description = entry.description ? `${entry.description}, \`${code}\`` : `Problem \`${code}\``;
    entry.content['application/problem+json']!.examples[code] = {
      summary: title,
      value: { type: PROBLEM_TYPE_BASE + code, title, status, detail: PROBLEM_DETAIL[code], code },
    };
  }
  return out;
}

const PROBLEM_DETAIL: Record<ErrorCode, string> = {
  invalid_request: 'callId: must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -',
  unauthorized: 'token expired',
  forbidden: 'only the callee answers a call',
  not_found: 'no call with this callId',
  method_not_allowed: 'DELETE is not allowed on /v1/calls; allowed: POST',
  answer_conflict: 'the call was answered by another installation',
  idempotency_conflict: 'operationId was used for a different request',
  revision_conflict: 'expectedRevision 1 does not match the current revision 2',
  call_exists: 'this callId was already used',
  not_in_call: 'the call is ringing: only an accepted call moves',
  call_not_active: 'the call has ended; messages are only for ringing or accepted calls',
  group_call_full: 'a group call holds at most GROUP_CALL_MAX_MEMBERS members besides its caller',
  payload_too_large: 'request body exceeds the limit of 16384 bytes',
  unsupported_media_type: 'content-type must be application/json, got "text/plain"',
  rate_limited: 'too many calls created by this user; retry later',
  internal: 'internal error; request 0b6f6d0e-5d1a-4c57-9d0e-8d7f2b1a3c4e',
  unavailable: 'the call store is unreachable; retry later',
  sfu_unavailable: "the call's media server is unreachable; the call goes on, retry media-session later",
};

export const COMMON = ['unauthorized', 'rate_limited', 'internal', 'unavailable'] as const;
export const callIdParam = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The callId: 1 to 128 characters of `A-Z a-z 0-9 . _ ~ : -` (a UUID fits), chosen by the caller.',
  schema: schema(s.opaqueId),
  example: CALL_ID,
};


/**
 * A call command's route, `POST /v1/calls/{id}/<command>`: its request body (`body`: the schema's
 * name and examples), and a 200 with the call's snapshot (`ok`: its description, example summary
 * and value) or the problems of `codes`.
 */
export function callCommandPath(
  operationId: string,
  summary: string,
  description: string,
  body: [schemaName: string, examples: Record<string, { summary: string; value: unknown }>],
  ok: [description: string, exampleSummary: string, example: unknown],
  codes: ErrorCode[],
): Record<string, unknown> {
  return {
    parameters: [callIdParam],
    post: {
      operationId,
      tags: ['Calls'],
      summary,
      description,
      requestBody: { required: true, content: json(body[0], body[1]) },
      responses: { '200': { description: ok[0], content: json('CallSnapshot', snapshotExamples(ok[1], ok[2])) }, ...problems(...codes) },
    },
  };
}
