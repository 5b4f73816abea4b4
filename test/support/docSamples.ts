import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './server.js';

/**
 * The code blocks of the pages a reader pastes from, and what the suite does with each
 * (docs/development.md "Code samples"). A fenced block's info string is its language and, after
 * it, one word saying how it runs:
 *
 *   ```sh                 shell lines, run in order per page in one bash session against `npm run dev`
 *   ```js  /  ```ts       a program, run with node / tsx against the same server (ts also type-checked)
 *   ```js webhook-receiver a webhook receiver: the server delivers real webhooks to it
 *   ```json <VARIABLE>    the value of a configuration variable, parsed as the server parses it at start
 *   ```json <Payload>     a body or event the server sends (CallSnapshot, MediaSession, call.message),
 *                         checked against the schema the server's contracts are built from
 *   ```<lang> not-run     shown, never run (payload illustrations, installs, the suites, benchmarks, Docker)
 *   ```                   no language: diagrams and wire formats, never run
 */

/** Pages scanned, relative to the repository. */
export function samplePages(): string[] {
  const docs = readdirSync(join(REPO_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs, 'packages/client/README.md', 'bench/README.md'];
}

export interface CodeBlock {
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  /** The word after the language ('' when none). */
  how: string;
  text: string;
}

export function codeBlocks(page: string): CodeBlock[] {
  const lines = readFileSync(join(REPO_ROOT, page), 'utf8').split('\n');
  const out: CodeBlock[] = [];
  let open: { line: number; info: string; body: string[] } | undefined;
  lines.forEach((l, i) => {
    const fence = /^```(.*)$/.exec(l);
    if (!open) {
      if (fence) open = { line: i + 1, info: fence[1]!.trim(), body: [] };
    } else if (fence && fence[1]!.trim() === '') {
      const [lang = '', how = '', ...rest] = open.info.split(/\s+/).filter(Boolean);
      out.push({ page, line: open.line, lang, how: rest.length ? `${how} ${rest.join(' ')}` : how, text: `${open.body.join('\n')}\n` });
      open = undefined;
    } else {
      open.body.push(l);
    }
  });
  if (open) throw new Error(`${page}:${open.line}: unclosed code block`);
  return out;
}

/** The configuration variables a `json <VARIABLE>` sample may be the value of. */
export const JSON_SAMPLE_VARIABLES = ['WEBHOOKS', 'PUSH_APPS'] as const;

/** The payloads a `json <Payload>` sample may be (test/unit/doc-samples.test.ts checks each against its schema). */
export const JSON_SAMPLE_PAYLOADS = ['CallSnapshot', 'MediaSession', 'call.message'] as const;

/**
 * The pages whose every code block the suite runs or checks: no `not-run` block, no block without
 * a language (docs/development.md "Code samples"). The mobile device page joins them once it exists.
 */
export const FULLY_CHECKED_PAGES = ['docs/api.md', 'docs/group-calls.md', 'docs/devices.md'] as const;

export type SampleKind =
  | { kind: 'none' }
  | { kind: 'shell' }
  | { kind: 'program'; runtime: 'node' | 'tsx' }
  | { kind: 'webhook-receiver' }
  | { kind: 'config'; variable: (typeof JSON_SAMPLE_VARIABLES)[number] }
  | { kind: 'payload'; payload: (typeof JSON_SAMPLE_PAYLOADS)[number] };

/** What the suite does with a block; throws for a block that follows no rule of the convention. */
export function sampleKind(b: CodeBlock): SampleKind {
  const where = `${b.page}:${b.line} (\`\`\`${b.lang}${b.how ? ` ${b.how}` : ''})`;
  if (b.lang === '' || b.how === 'not-run') return { kind: 'none' };
  if (b.lang === 'sh' && b.how === '') return { kind: 'shell' };
  if ((b.lang === 'js' || b.lang === 'ts') && b.how === '') return { kind: 'program', runtime: b.lang === 'js' ? 'node' : 'tsx' };
  if (b.lang === 'js' && b.how === 'webhook-receiver') return { kind: 'webhook-receiver' };
  const variable = JSON_SAMPLE_VARIABLES.find((v) => v === b.how);
  if (b.lang === 'json' && variable) return { kind: 'config', variable };
  const payload = JSON_SAMPLE_PAYLOADS.find((p) => p === b.how);
  if (b.lang === 'json' && payload) return { kind: 'payload', payload };
  throw new Error(
    `${where}: not a code sample the suite knows how to run. Use \`\`\`sh, \`\`\`js, \`\`\`ts, \`\`\`js webhook-receiver, \`\`\`json <${JSON_SAMPLE_VARIABLES.join('|')}>, \`\`\`json <${JSON_SAMPLE_PAYLOADS.join('|')}>, or mark it \`\`\`${b.lang || '<lang>'} not-run (docs/development.md "Code samples")`,
  );
}

/** Every block of every page, each with its kind. */
export function allSamples(): (CodeBlock & { sample: SampleKind })[] {
  return samplePages().flatMap((page) => codeBlocks(page).map((b) => ({ ...b, sample: sampleKind(b) })));
}

/**
 * A sample's text pointed at a test server: samples address the server as `npm run dev` serves it
 * (`http://localhost:8080`) or as a deployment (`https://calls.example.com`, `wss://…`).
 */
export function pointedAt(text: string, port: number): string {
  return text
    .replace(/https?:\/\/(localhost|127\.0\.0\.1):8080/g, `http://127.0.0.1:${port}`)
    .replace(/https:\/\/calls\.example\.com/g, `http://127.0.0.1:${port}`)
    .replace(/wss:\/\/calls\.example\.com/g, `ws://127.0.0.1:${port}`);
}
