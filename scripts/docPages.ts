/**
 * The hand-written pages with generated regions (`<!-- generated:NAME … -->` … `<!-- /generated:NAME -->`),
 * each as `npm run docs` writes it: the page as checked in, with every region rewritten from its
 * one source: src/contracts/docTables.ts, the call machine's rows (src/calls/machine.ts), the
 * audience rules run over every group change (src/events/audienceTable.ts), and bench/results/figures.json for the figures. test/unit/generated-pages.test.ts fails while a checked-in
 * page differs from this.
 */
import { readFileSync } from 'node:fs';
import { commandsTable, errorsTable, fillRegions, idempotencyList } from '../src/contracts/docTables.js';
import { machineTable, memberStatesTable } from '../src/calls/machine.js';
import { groupAudienceTable, pairAudienceTable } from '../src/events/audienceTable.js';
import { figuresTable, headlineTable, readFigures } from '../bench/lib/figures.js';

const root = new URL('../', import.meta.url);
const readRepo = (path: string) => readFileSync(new URL(path, root), 'utf8');

/** Each page's regions, by name. */
export function pageRegions(read: (path: string) => string = readRepo): Map<string, Record<string, string>> {
  const figures = readFigures(read);
  return new Map<string, Record<string, string>>([
    ['README.md', { figures: headlineTable(figures, 'README.md') }],
    ['docs/performance.md', { figures: figuresTable(figures, 'docs/performance.md') }],
    ['docs/api.md', { errors: errorsTable(), idempotency: idempotencyList(), audience: pairAudienceTable() }],
    ['docs/signaling.md', { commands: commandsTable() }],
    ['docs/protocol.md', { machine: machineTable(), memberStates: memberStatesTable() }],
    ['docs/group-calls.md', { audience: groupAudienceTable() }],
  ]);
}

/** Every page with generated regions, by repository path, as the exact text to check in. */
export function generatedPages(read: (path: string) => string = readRepo): Map<string, string> {
  const out = new Map<string, string>();
  for (const [path, regions] of pageRegions(read)) out.set(path, fillRegions(read(path), regions, path));
  return out;
}
