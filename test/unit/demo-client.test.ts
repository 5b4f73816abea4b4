import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEMO_CLIENT_MODULES, demoClientModule } from '../../scripts/demoClient.js';

/** The softphone runs the client package's own media-session keeper: its copy in demo/ is the current build. */
describe('demo copies of the client package', () => {
  const root = new URL('../../', import.meta.url);
  for (const { from, to } of DEMO_CLIENT_MODULES) {
    it(`${to} is ${from} compiled (npm run demo-client)`, () => {
      expect(readFileSync(new URL(to, root), 'utf8')).toBe(demoClientModule(root, from));
    });
  }
});
