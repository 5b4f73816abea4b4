/**
 * Writes the generated interface documents: docs/openapi.json, docs/asyncapi.json,
 * docs/schemas/*.json and docs/configuration.md.
 * `npm run docs` after changing a schema; a test fails while the checked-in copies are stale.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { generatedDocuments } from '../src/contracts/documents.js';

for (const [path, text] of generatedDocuments()) {
  mkdirSync(new URL('.', new URL(`../${path}`, import.meta.url)), { recursive: true });
  writeFileSync(new URL(`../${path}`, import.meta.url), text);
  process.stdout.write(`wrote ${path}\n`);
}
