import { readFileSync, writeFileSync } from 'node:fs';
import { htmlReport, type RunResults } from './lib/htmlReport.js';

/**
 * `npm run bench:report -- bench/results/<run>.json`: writes the run's HTML charts beside its JSON
 * (`<run>.html`), as the run itself did. The committed reference runs keep only their JSON and
 * Markdown: their charts are rebuilt from the JSON with this (docs/performance.md).
 */

const files = process.argv.slice(2);
if (files.length === 0 || files.some((f) => !f.endsWith('.json'))) {
  process.stderr.write('usage: npm run bench:report -- bench/results/<run>.json [...]\n');
  process.exit(2);
}
for (const json of files) {
  const html = json.replace(/\.json$/, '.html');
  writeFileSync(html, htmlReport(JSON.parse(readFileSync(json, 'utf8')) as RunResults));
  process.stdout.write(`wrote ${html}\n`);
}
