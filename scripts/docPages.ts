/**
 * The hand-written pages with generated regions (`<!-- generated:NAME … -->` … `<!-- /generated:NAME -->`),
 * each as `npm run docs` writes it: the page as checked in, with every region rewritten from its
 * one source (src/contracts/docTables.ts). test/unit/generated-pages.test.ts fails while a checked-in
 * page differs from this.
 */
import { readFileSync } from 'node:fs';
import { commandsTable, errorsTable, fillRegions, idempotencyList } from '../src/contracts/docTables.js';

const root = new URL('../', import.meta.url);

/** Each page's regions, by name. */
export function pageRegions(): Map<string, Record<string, string>> {
  return new Map<string, Record<string, string>>([
    ['docs/api.md', { errors: errorsTable(), idempotency: idempotencyList() }],
    ['docs/signaling.md', { commands: commandsTable() }],
  ]);
}

/** Every page with generated regions, by repository path, as the exact text to check in. */
export function generatedPages(read: (path: string) => string = (path) => readFileSync(new URL(path, root), 'utf8')): Map<string, string> {
  const out = new Map<string, string>();
  for (const [path, regions] of pageRegions()) out.set(path, fillRegions(read(path), regions, path));
  return out;
}
