import { z } from 'zod';
import { openApiDocument } from './openapi.js';
import { asyncApiDocument } from './asyncapi.js';
import { configurationPage } from '../config/configurationPage.js';
import { machineLua } from '../calls/machine.js';
import {
  acceptedSchema,
  apnsAlertBodySchema,
  apnsBodySchema,
  endedSchema,
  fcmMessageSchema,
  invitationSchema,
  messageSchema,
  missedSchema,
  participantSchema, movedSchema,
  renamedSchema,
  ringingSchema,
} from '../events/payloadSchemas.js';

/** Where the JSON Schemas say they live: each schema's `$id` is this plus its file name. */
export const SCHEMA_ID_BASE = 'https://calling-backend.dev/schemas/';

/** Every generated document, by repository path, as the exact text checked in. */
export function generatedDocuments(): Map<string, string> {
  const text = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
  const docs = new Map<string, string>([
    ['docs/openapi.json', text(openApiDocument())],
    ['docs/asyncapi.json', text(asyncApiDocument())],
    ['docs/configuration.md', configurationPage()],
    // The call machine's rows, as the Lua scripts read them (lua/includes/callMachine.lua).
    ['lua/includes/callMachineRules.lua', `${machineLua()}\n`],
  ]);
  const schemas = {
    'call.invited': invitationSchema,
    'call.accepted': acceptedSchema,
    'call.ended': endedSchema,
    'call.renamed': renamedSchema,
    'call.ringing': ringingSchema,
    'call.participant': participantSchema,
    'call.moved': movedSchema,
    'call.message': messageSchema,
    'call.missed': missedSchema,
    'ios-voip-push-body': apnsBodySchema,
    'ios-missed-call-alert-body': apnsAlertBodySchema,
    'android-push-message': fcmMessageSchema,
  };
  for (const [name, schema] of Object.entries(schemas)) {
    const { $schema, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12' }) as Record<string, unknown>;
    docs.set(`docs/schemas/${name}.json`, text({ $schema, $id: `${SCHEMA_ID_BASE}${name}.json`, ...rest }));
  }
  return docs;
}
