import { z } from 'zod';
import { principalId } from './schemas.js';
import { errors } from './errors.js';
import type { Reply } from './command.js';
import { CALL_POLICY_MODES, DND_ACTIONS, MAX_BLOCKED, MAX_ALLOWED, MAX_FAVOURITES, MAX_IDS_PER_REQUEST, type CallPolicyStore } from '../calls/callPolicy.js';

/**
 * The call policy's requests (docs/call-policy.md), the same for a user's own devices and for the
 * app's backend through the server API: read it, change its mode, block list, do not disturb and
 * favourites, and (server API only) replace the allow list page by page.
 */

const idList = (what: string) =>
  z
    .array(principalId)
    .max(MAX_IDS_PER_REQUEST, `at most ${MAX_IDS_PER_REQUEST} userIds per request`)
    .default([])
    .describe(`userIds to ${what}, at most ${MAX_IDS_PER_REQUEST} per request`);

/** Do not disturb's end: a time to come, within a year (a phone's "until tomorrow 8:00"). */
const DND_MAX_AHEAD_MS = 366 * 24 * 3600_000;

export const callPolicyBody = z.object({
  mode: z.enum(CALL_POLICY_MODES).optional().describe('who may call: everyone (the default), contacts (the allow list only) or nobody'),
  block: idList('add to the block list'),
  unblock: idList('remove from the block list (before `block` is applied)'),
  doNotDisturb: z
    .object({
      on: z.boolean().describe('true: on (until `untilMs` when given, else until turned off); false: off'),
      untilMs: z
        .number()
        .int()
        .refine((t) => t > Date.now() && t <= Date.now() + DND_MAX_AHEAD_MS, 'must be a time (ms since the epoch) to come, within a year')
        .optional()
        .describe('when it ends by itself'),
      action: z.enum(DND_ACTIONS).optional().describe('silence (the default: the call lands in history as missed, nothing rings, the caller hears it ring out) or reject (the caller gets busy)'),
    })
    .strict()
    .refine((d) => d.on || d.untilMs === undefined, 'untilMs: only with on: true')
    .optional()
    .describe('do not disturb (docs/call-policy.md "Do not disturb")'),
  favourite: idList('let through do not disturb'),
  unfavourite: idList('take off the favourites (before `favourite` is applied)'),
});

export const allowListPageBody = z.object({
  replaceId: z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'must be 1 to 128 letters, digits or ._:-').describe('names one replace; never reuse it for another list'),
  page: z.number().int().min(0).max(Math.ceil(MAX_ALLOWED / MAX_IDS_PER_REQUEST)).describe('0, 1, 2, … in order'),
  userIds: z.array(principalId).max(MAX_IDS_PER_REQUEST, `at most ${MAX_IDS_PER_REQUEST} userIds per page`),
  last: z.boolean().describe('true on the last page: the new list replaces the old one at once'),
});

/** GET …/allow-list: `cursor` (from the last page; '0' or none to start) and `limit` (a hint, 1 to 1,000). */
export const allowListQuery = z.object({
  cursor: z.string().regex(/^\d{1,20}$/, 'must be the nextCursor of the last page').default('0'),
  limit: z.coerce.number().int().min(1).max(MAX_IDS_PER_REQUEST).default(MAX_IDS_PER_REQUEST),
});

export async function listAllowed(store: CallPolicyStore, userId: string, q: z.output<typeof allowListQuery>): Promise<Reply> {
  return { status: 200, body: JSON.stringify({ userId, ...(await store.listAllowed(userId, q.cursor, q.limit)) }) };
}

export async function readPolicy(store: CallPolicyStore, userId: string): Promise<Reply> {
  return { status: 200, body: JSON.stringify(await store.read(userId)) };
}

export async function editPolicy(store: CallPolicyStore, userId: string, body: z.output<typeof callPolicyBody>): Promise<Reply> {
  if (body.block.includes(userId)) throw errors.invalidRequest('block: you cannot block yourself');
  const r = await store.edit(userId, body);
  if (r.kind === 'too_many_blocked') throw errors.invalidRequest(`block: at most ${MAX_BLOCKED} users may be blocked; nothing was changed`);
  if (r.kind === 'too_many_favourites') throw errors.invalidRequest(`favourite: at most ${MAX_FAVOURITES} users may be favourites; nothing was changed`);
  return { status: 200, body: JSON.stringify(r.policy) };
}

export async function replaceAllowPage(store: CallPolicyStore, userId: string, body: z.output<typeof allowListPageBody>): Promise<Reply> {
  const r = await store.replaceAllowPage(userId, body);
  if (r.kind === 'failure') {
    if (r.code === 'too_many_allowed') throw errors.invalidRequest(`userIds: an allow list holds at most ${MAX_ALLOWED} users; the replace was dropped, the list in use stays`);
    if (r.code === 'replace_expired') throw errors.invalidRequest('replaceId: this replace waited too long for its next page; start again from page 0 with a new replaceId');
    throw errors.invalidRequest('page: pages of a replace are sent in order from 0');
  }
  return { status: 200, body: JSON.stringify({ userId, replaceId: body.replaceId, state: r.state, size: r.size }) };
}
