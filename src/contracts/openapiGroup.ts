import * as s from '../commands/schemas.js';
import { CALL_ID, COMMON, RINGING, T0, callIdParam, json, problems, schema, snapshotExamples } from './openapiParts.js';

/** The group call and ringing receipt parts of the OpenAPI document (docs/group-calls.md). */

/** A group call ringing three members, one of whom joined. */
const GROUP = {
  ...RINGING,
  revision: '2',
  state: 'accepted',
  calleeUserId: '',
  acceptedAtMs: T0 + 4_000,
  title: 'Team standup',
  participants: [
    { userId: 'alice', state: 'joined', installationId: 'alice-phone', joinedAtMs: T0 },
    { userId: 'bob', state: 'joined', installationId: 'bob-phone', invitedAtMs: T0, joinedAtMs: T0 + 4_000 },
    { userId: 'carol', state: 'ringing', invitedAtMs: T0, ringUntilMs: T0 + 30_000 },
  ],
};

export const groupCreateExample = {
  group: { summary: 'A group call', value: { callId: CALL_ID, calleeUserIds: ['bob', 'carol'], title: 'Team standup', operationId: 'op-create-2', video: true } },
};

export function groupCallPaths(): Record<string, unknown> {
  return {
    '/v1/calls/{id}/invite': {
      parameters: [callIdParam],
      post: {
        operationId: 'inviteToCall',
        tags: ['Calls'],
        summary: 'Ring more members into a group call',
        description:
          'A member in the group call, from its installation in the call, rings more users: new users become `invited`, members ' +
          'who declined, missed, were busy or left are rung again; members ringing or in the call stay as they are. The invitees get ' +
          '`call.invited` and pushes as at the create; those in the call get `call.participant` (docs/group-calls.md "Inviting more").',
        requestBody: { required: true, content: json('InviteToCall', { invite: { summary: 'Ring one more', value: { operationId: 'op-invite-1', userIds: ['dave'] } } }) },
        responses: {
          '200': { description: 'The snapshot', content: json('CallSnapshot', snapshotExamples('Group call', GROUP)) },
          ...problems('invalid_request', 'forbidden', 'not_found', 'idempotency_conflict', 'call_not_active', 'group_call_full', ...COMMON),
        },
      },
    },
    '/v1/calls/{id}/ringing': {
      parameters: [callIdParam],
      post: {
        operationId: 'noteRinging',
        tags: ['Calls'],
        summary: 'Report that this installation shows the incoming call',
        description:
          'A ringing receipt, for one-to-one and group calls. The first of each invitee sends `call.ringing` to the caller’s ' +
          'installations (in a group call the member becomes `ringing`); later ones change nothing. A one-to-one call keeps ' +
          'its revision (docs/group-calls.md "Ringing receipts").',
        requestBody: { required: true, content: json('RingingReceipt', { receipt: { summary: 'Shown after a VoIP push', value: { operationId: 'op-ringing-1', via: 'apns' } } }) },
        responses: {
          '200': { description: 'The snapshot', content: json('CallSnapshot', snapshotExamples('Ringing', RINGING)) },
          ...problems('invalid_request', 'forbidden', 'not_found', 'idempotency_conflict', ...COMMON),
        },
      },
    },
  };
}

export const groupRequestSchemas = {
  InviteToCall: schema(s.inviteBody, 'input'),
  RingingReceipt: schema(s.ringingBody, 'input'),
};
