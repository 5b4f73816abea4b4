import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { pushApps } from '../../src/config/pushApps.js';
import { webhookEndpoints } from '../../src/webhooks/endpoints.js';
import { allSamples, codeBlocks, samplePages, sampleKind, type CodeBlock } from '../support/docSamples.js';

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
});
