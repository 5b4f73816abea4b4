/** Writes the client package's modules the softphone loads into demo/ (scripts/demoClient.ts). */
import { writeFileSync } from 'node:fs';
import { DEMO_CLIENT_MODULES, demoClientModule } from './demoClient.js';

const root = new URL('../', import.meta.url);
for (const { from, to } of DEMO_CLIENT_MODULES) {
  writeFileSync(new URL(to, root), demoClientModule(root, from));
  process.stdout.write(`wrote ${to}\n`);
}
