import type { z } from 'zod';
import { acceptedSchema, endedSchema, invitationSchema, movedSchema, participantSchema, renamedSchema, ringingSchema } from '../events/payloadSchemas.js';
import { ref, schema } from './openapiParts.js';

/** The events of the log, each by its `type` and its component name in the OpenAPI document. */
const EVENTS: [type: string, component: string, payload: z.ZodType][] = [
  ['call.invited', 'CallInvited', invitationSchema],
  ['call.accepted', 'CallAccepted', acceptedSchema],
  ['call.ended', 'CallEnded', endedSchema],
  ['call.renamed', 'CallRenamed', renamedSchema],
  ['call.ringing', 'CallRinging', ringingSchema],
  ['call.participant', 'CallParticipant', participantSchema],
  ['call.moved', 'CallMoved', movedSchema],
];

/** Each event's schema, and `CallEvent`: one of them, told apart by `type`. */
export function eventComponents(): Record<string, unknown> {
  return {
    ...Object.fromEntries(EVENTS.map(([, name, payload]) => [name, schema(payload)])),
    CallEvent: {
      description: 'One event of the log, told apart by `type`.',
      oneOf: EVENTS.map(([, name]) => ref(name)),
      discriminator: { propertyName: 'type', mapping: Object.fromEntries(EVENTS.map(([type, name]) => [type, `#/components/schemas/${name}`])) },
    },
  };
}
