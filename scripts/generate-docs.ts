/**
 * Writes the generated interface documents: docs/openapi.json, docs/asyncapi.json,
 * docs/schemas/*.json and docs/configuration.md; then the generated regions of the hand-written
 * pages (scripts/docPages.ts), from those documents.
 * `npm run docs` after changing a schema; a test fails while the checked-in copies are stale.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { generatedDocuments } from '../src/contracts/documents.js';
import { generatedPages } from './docPages.js';

for (const [path, text] of generatedDocuments()) {
  mkdirSync(new URL('.', new URL(`../${path}`, import.meta.url)), { recursive: true });
  writeFileSync(new URL(`../${path}`, import.meta.url), text);
  process.stdout.write(`wrote ${path}\n`);
}

for (const [path, text] of generatedPages()) {
  writeFileSync(new URL(`../${path}`, import.meta.url), text);
  process.stdout.write(`wrote the generated regions of ${path}\n`);
}
