import { z } from 'zod';
import { allowListPageBody, callPolicyBody } from '../commands/callPolicy.js';
import { CALL_POLICY_MODES, DND_ACTIONS } from '../calls/callPolicy.js';
import { COMMON, json, problems, schema } from './openapiParts.js';

/** The OpenAPI document's call policy parts (docs/call-policy.md): the user's routes and the server API's. */

const callPolicy = z.object({
  userId: z.string(),
  mode: z.enum(CALL_POLICY_MODES),
  blockedUserIds: z.array(z.string()).describe('the block list, oldest first'),
  allowListSize: z.number().int().describe('how many users the allow list holds'),
  doNotDisturb: z.object({
    on: z.boolean().describe('on now: turned on, and its untilMs (if any) not yet passed'),
    untilMs: z.number().int().nullable().describe('when it ends by itself; null: when turned off'),
    action: z.enum(DND_ACTIONS).describe('silence: the call lands in history as missed, nothing rings; reject: the caller gets busy'),
    favouriteUserIds: z.array(z.string()).describe('users whose calls ring through it, oldest first'),
  }),
});
const allowListPageResult = z.object({
  userId: z.string(),
  replaceId: z.string(),
  state: z.enum(['gathering', 'committed']).describe('committed: the list in use is now this replace\'s'),
  size: z.number().int().describe('gathering: ids received so far; committed: the size of the list in use'),
});

const allowListPage = z.object({
  userId: z.string(),
  userIds: z.array(z.string()).describe('a page of the allow list in use, in no order'),
  nextCursor: z.string().nullable().describe('the cursor of the next page; null after the last'),
});

export const policySchemas = {
  AllowListRead: schema(allowListPage),
  CallPolicy: schema(callPolicy),
  CallPolicyEdit: schema(callPolicyBody, 'input'),
  AllowListPage: schema(allowListPageBody, 'input'),
  AllowListPageResult: schema(allowListPageResult),
};

const POLICY = { userId: 'bob', mode: 'contacts', blockedUserIds: ['mallory'], allowListSize: 212, doNotDisturb: { on: true, untilMs: 1767337200000, action: 'silence', favouriteUserIds: ['mum'] } };
const EDIT = { summary: 'Contacts only, block one caller', value: { mode: 'contacts', block: ['mallory'] } };
const read = (operationId: string, tags: string[], security: unknown, problemCodes: readonly string[]) => ({
  operationId,
  tags,
  ...(security ? { security } : {}),
  summary: 'Read the call policy',
  description: 'Who may call the user: the mode, the block list and the allow list\'s size (docs/call-policy.md).',
  responses: { '200': { description: 'The policy', content: json('CallPolicy', { policy: { summary: 'Contacts only', value: POLICY } }) }, ...problems(...(problemCodes as Parameters<typeof problems>)) },
});
const edit = (operationId: string, tags: string[], security: unknown, problemCodes: readonly string[]) => ({
  operationId,
  tags,
  ...(security ? { security } : {}),
  summary: 'Change the mode, the block list and do not disturb',
  description:
    'Sets `mode` and `doNotDisturb` (when given), removes `unblock` from the block list, then adds `block`, and the ' +
    'same for `unfavourite` and `favourite`, at once. At most 1,000 users blocked, 100 favourites and 1,000 userIds per ' +
    'list per request; past a bound nothing changes (400). A call that is blocked or not allowed never rings: the ' +
    'caller sees it ring out (or busy, SCREENED_CALL_REPLY). Do not disturb stops calls from anyone but favourites: ' +
    '`silence` lets them ring out for the caller and records them as missed; `reject` answers busy.',
  requestBody: { required: true, content: json('CallPolicyEdit', { edit: EDIT }) },
  responses: { '200': { description: 'The policy now', content: json('CallPolicy', { policy: { summary: 'Contacts only', value: POLICY } }) }, ...problems(...(problemCodes as Parameters<typeof problems>)) },
});

export function devicePolicyPaths(): Record<string, unknown> {
  const codes = ['invalid_request', ...COMMON] as const;
  return { '/v1/call-policy': { get: read('getCallPolicy', ['Call policy'], undefined, codes), put: edit('editCallPolicy', ['Call policy'], undefined, codes) } };
}

export function serverPolicyPaths(userIdParam: unknown, security: unknown, serverProblems: readonly string[]): Record<string, unknown> {
  const codes = ['invalid_request', ...serverProblems];
  return {
    '/v1/server/users/{userId}/call-policy': {
      parameters: [userIdParam],
      get: read('serverGetCallPolicy', ['Server API'], security, codes),
      put: edit('serverEditCallPolicy', ['Server API'], security, codes),
    },
    '/v1/server/users/{userId}/allow-list': {
      parameters: [userIdParam],
      get: {
        operationId: 'serverReadAllowList',
        tags: ['Server API'],
        security,
        summary: 'Read the allow list, page by page',
        description:
          'Walks the allow list in use with a cursor (Redis SSCAN): start without `cursor` (or with `0`) and follow ' +
          '`nextCursor` until it is null. `limit` (1 to 1,000, default 1,000) is a hint of the page size. A user may come ' +
          'twice in a walk; a replace committed during it ends the walk on the new list.',
        parameters: [
          { name: 'cursor', in: 'query', required: false, schema: { type: 'string', pattern: '^\\d{1,20}$' } },
          { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000 } },
        ],
        responses: {
          '200': { description: 'A page', content: json('AllowListRead', { last: { summary: 'The last page', value: { userId: 'bob', userIds: ['alice', 'carol'], nextCursor: null } } }) },
          ...problems(...(codes as Parameters<typeof problems>)),
        },
      },
      put: {
        operationId: 'serverReplaceAllowList',
        tags: ['Server API'],
        security,
        summary: 'Replace the allow list, page by page',
        description:
          'Sends the whole new allow list ("contacts") in pages of at most 1,000 userIds, numbered from 0, under one ' +
          '`replaceId`. Nothing is seen until the page with `last: true`, which swaps the new list in at once. Any page ' +
          'sent again is answered as the first time and changes nothing. At most 50,000 users; past it the replace is ' +
          'dropped and the list in use stays. A replace left unfinished for an hour must start again.',
        requestBody: {
          required: true,
          content: json('AllowListPage', { first: { summary: 'The first of two pages', value: { replaceId: 'sync-2026-11-28T23:00', page: 0, userIds: ['alice', 'carol'], last: false } } }),
        },
        responses: {
          '200': {
            description: 'The page was taken',
            content: json('AllowListPageResult', { gathering: { summary: 'More pages to come', value: { userId: 'bob', replaceId: 'sync-2026-11-28T23:00', state: 'gathering', size: 2 } } }),
          },
          ...problems(...(codes as Parameters<typeof problems>)),
        },
      },
    },
  };
}
