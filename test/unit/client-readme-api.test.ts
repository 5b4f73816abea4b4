import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLIENT_README, clientApiMarkdown, withApiSection } from '../../scripts/client-api.js';

/**
 * the client package README's API section lists every public method and event of the package, generated
 * from its types by TypeDoc (scripts/client-api.ts): the list in the README is the one the types
 * give today. After changing the package's API, run `npm run client-api`.
 */
describe('the client package README', () => {
  it('lists every public method and event the types declare, as `npm run client-api` writes them', async () => {
    const readme = readFileSync(CLIENT_README, 'utf8');
    const generated = await clientApiMarkdown();
    expect(withApiSection(readme, generated), 'packages/client/README.md differs from its types: run `npm run client-api`').toBe(readme);
    // The list is not empty by accident: the main entry points are in it.
    for (const name of ['createCall', 'answer', 'end', 'getCall', 'mediaSession', 'followMessages', 'start', 'onEvent', 'onMessage', 'saveCursor']) {
      expect(generated).toMatch(new RegExp(`^- \`${name}\\??[(:]`, 'm'));
    }
  }, 60_000);
});
