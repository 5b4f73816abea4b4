import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { pushApps } from '../../src/config/pushApps.js';
import { webhookEndpoints } from '../../src/webhooks/endpoints.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { callSnapshot, mediaSession } from '../../src/commands/schemas.js';
import { messageSchema } from '../../src/events/payloadSchemas.js';
import { allSamples, codeBlocks, FULLY_CHECKED_PAGES, JSON_SAMPLE_PAYLOADS, samplePages, sampleKind, type CodeBlock } from '../support/docSamples.js';
import { REPO_ROOT } from '../support/server.js';

const PAYLOAD_SCHEMAS = { CallSnapshot: callSnapshot, MediaSession: mediaSession, 'call.message': messageSchema } as const satisfies Record<(typeof JSON_SAMPLE_PAYLOADS)[number], unknown>;

/**
 * The code-sample convention (docs/development.md "Code samples"): every code block of the pages
 * a reader pastes from is either a sample the suite runs or marked as not run, and the samples
 * that are configuration values are parsed here, as the server parses them at start. The shell,
 * program and webhook-receiver samples run against a real server in test/e2e/doc-samples.test.ts.
 */

const block = (lang: string, how = ''): CodeBlock => ({ page: 'docs/x.md', line: 3, lang, how, text: 'x\n' });

describe('code samples', () => {
  it('the convention refuses a block it does not know how to run, naming the page and line', () => {
    expect(() => sampleKind(block('bash'))).toThrow(/docs\/x\.md:3 \(```bash\): not a code sample the suite knows how to run/);
    expect(() => sampleKind(block('json'))).toThrow(/mark it ```json not-run/);
    expect(() => sampleKind(block('json', 'REDIS_URL'))).toThrow(/docs\/x\.md:3/);
    expect(() => sampleKind(block('sh', 'server'))).toThrow(/docs\/x\.md:3/);
    expect(sampleKind(block('yaml', 'not-run'))).toEqual({ kind: 'none' });
    expect(sampleKind(block(''))).toEqual({ kind: 'none' });
  });

  it('every code block of README, CONTRIBUTING, docs/, the client package and the bench follows it', () => {
    const problems: string[] = [];
    let blocks = 0;
    for (const page of samplePages()) {
      for (const b of codeBlocks(page)) {
        blocks++;
        try {
          sampleKind(b);
        } catch (err) {
          problems.push((err as Error).message);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(blocks).toBeGreaterThan(25);
  });

  it('the pages hold runnable samples of every kind: the server API, tokens, the client package, a webhook receiver, configuration', () => {
    const samples = allSamples();
    const count = (kind: string, page?: string) => samples.filter((s) => s.sample.kind === kind && (!page || s.page === page)).length;
    expect(count('shell', 'docs/api.md')).toBeGreaterThanOrEqual(2);
    expect(count('shell', 'docs/server-api.md')).toBeGreaterThanOrEqual(5);
    expect(count('program', 'docs/api.md')).toBe(1);
    expect(count('program', 'packages/client/README.md')).toBe(2);
    expect(count('webhook-receiver', 'docs/webhooks.md')).toBe(1);
    expect(count('config')).toBe(2);
  });

  it('each configuration sample is a value the server accepts at start', () => {
    const configs = allSamples().filter((s) => s.sample.kind === 'config');
    for (const s of configs) {
      const where = `${s.page}:${s.line}`;
      if (s.sample.kind !== 'config') continue;
      const config = loadConfig({ [s.sample.variable]: s.text });
      const entries = s.sample.variable === 'WEBHOOKS' ? webhookEndpoints(config) : pushApps(config).apps;
      expect(entries.length, where).toBeGreaterThan(1);
    }
    expect(configs.map((s) => s.sample.kind === 'config' && s.sample.variable).sort()).toEqual(['PUSH_APPS', 'WEBHOOKS']);
  });

  it('each payload sample is JSON that its schema accepts, with no field the schema lacks', () => {
    const payloads = allSamples().filter((s) => s.sample.kind === 'payload');
    expect(payloads.map((s) => s.sample.kind === 'payload' && s.sample.payload).sort()).toEqual([...JSON_SAMPLE_PAYLOADS].sort());
    for (const s of payloads) {
      if (s.sample.kind !== 'payload') continue;
      const where = `${s.page}:${s.line}`;
      const schema = PAYLOAD_SCHEMAS[s.sample.payload];
      const value = JSON.parse(s.text) as Record<string, unknown>;
      const parsed = schema.safeParse(value);
      expect(parsed.error?.issues ?? [], where).toEqual([]);
      expect(Object.keys(value).filter((k) => !(k in schema.shape)), where).toEqual([]);
    }
    // The check can fail: a renamed field, a wrong type.
    expect(callSnapshot.safeParse({ ...JSON.parse(payloads.find((s) => s.sample.kind === 'payload' && s.sample.payload === 'CallSnapshot')!.text), state: 'answered' }).success).toBe(false);
  });

  it('every code block of docs/api.md, docs/group-calls.md (and docs/devices.md once it exists) is run or checked', () => {
    const pages = FULLY_CHECKED_PAGES.filter((p) => existsSync(join(REPO_ROOT, p)));
    expect(pages).toEqual(expect.arrayContaining(['docs/api.md', 'docs/group-calls.md']));
    const unchecked = pages.flatMap((page) => codeBlocks(page).filter((b) => sampleKind(b).kind === 'none').map((b) => `${page}:${b.line} (\`\`\`${b.lang} ${b.how})`));
    expect(unchecked).toEqual([]);
  });
});
