import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generatedPages, pageRegions } from '../../scripts/docPages.js';
import { asyncApiFrameTypes, fillRegions, idempotentOperations } from '../../src/contracts/docTables.js';
import { errorCatalogue } from '../../src/commands/errors.js';
import { CALL_COMMANDS } from '../../src/commands/callCommands.js';

/**
 * The generated regions of the hand-written pages (scripts/docPages.ts) are what `npm run docs`
 * writes from their one source: docs/signaling.md "Commands" from the command registry and the
 * AsyncAPI document, docs/api.md "Errors" from the error catalogue and the routes' responses,
 * docs/api.md "Idempotency" from the request schemas that take an operationId. The checked-in
 * pages are read back here, so a frame type, code or route added in the code without
 * `npm run docs` fails.
 */

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const rowsOf = (page: string, heading: string) => {
  const section = page.slice(page.indexOf(`\n${heading}\n`));
  const next = section.slice(heading.length + 2).search(/\n#{1,3} /);
  return [...section.slice(0, next < 0 ? undefined : next + heading.length + 2).matchAll(/^\| `([\w.]+)`.*\n(?!\|-)/gm)].map((m) => m[1]!); // not a header row
};

describe('generated regions of the hand-written pages', () => {
  it('each page is as `npm run docs` writes it', () => {
    const pages = generatedPages();
    expect([...pages.keys()].sort()).toEqual([...pageRegions().keys()].sort());
    for (const [path, text] of pages) expect(read(path), `${path} is stale: run npm run docs`).toBe(text);
  });

  it('the check fails when a row is removed or a region is lost', () => {
    const signaling = read('docs/signaling.md');
    const withoutRow = signaling.replace(/^\| `invite` \|.*\n/m, '');
    expect(withoutRow).not.toBe(signaling);
    expect(generatedPages((p) => (p === 'docs/signaling.md' ? withoutRow : read(p))).get('docs/signaling.md')).toBe(signaling);
    expect(() => fillRegions('# no region here\n', { commands: 'x' }, 'docs/x.md')).toThrow(/docs\/x\.md has no region commands/);
  });

  it('docs/signaling.md has a row for every frame type of the AsyncAPI document, each way', () => {
    const page = read('docs/signaling.md');
    const frames = asyncApiFrameTypes();
    expect(frames.send).toEqual(expect.arrayContaining(['ping', ...CALL_COMMANDS.keys()]));
    expect(rowsOf(page, '## Commands').sort()).toEqual([...frames.send].sort());
    expect(rowsOf(page, '## Server → client frames').sort()).toEqual([...frames.receive].sort());
  });

  it('docs/api.md lists every error code once, and every request that takes an operationId', () => {
    const page = read('docs/api.md');
    expect(rowsOf(page, '## Errors')).toEqual(Object.keys(errorCatalogue));
    const listed = [...page.matchAll(/^- `(POST|PUT|GET|DELETE) ([^`]+)` \(`(\w+)`/gm)].map((m) => m[3]);
    expect(listed).toEqual(idempotentOperations().map((o) => o.operationId));
    expect(listed).toEqual(expect.arrayContaining(['createCall', 'answerCall', 'endCall', 'renameCall', 'inviteToCall', 'noteRinging', 'sendCallMessage']));
  });
});
