import { z } from 'zod';
import { openApiDocument } from './openapi.js';
import {
  acceptedSchema,
  apnsBodySchema,
  endedSchema,
  fcmMessageSchema,
  invitationSchema,
  messageSchema,
  renamedSchema,
} from '../events/payloadSchemas.js';

/** Every generated document, by repository path, as the exact text checked in. */
export function generatedDocuments(): Map<string, string> {
  const text = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
  const docs = new Map<string, string>([['docs/openapi.json', text(openApiDocument())]]);
  const schemas = {
    'call.invited': invitationSchema,
    'call.accepted': acceptedSchema,
    'call.ended': endedSchema,
    'call.renamed': renamedSchema,
    'call.message': messageSchema,
    'ios-voip-push-body': apnsBodySchema,
    'android-push-message': fcmMessageSchema,
  };
  for (const [name, schema] of Object.entries(schemas)) {
    docs.set(`docs/schemas/${name}.json`, text(z.toJSONSchema(schema, { target: 'draft-2020-12' })));
  }
  return docs;
}
