import { readFileSync } from 'node:fs';
import ts from 'typescript';

/**
 * The client package's modules the browser softphone loads as they are (demo/ has no build step):
 * each is TypeScript compiled to an ES module in demo/, with a header saying where it comes from.
 * It imports nothing at run time (packages/client/src/media.ts), so one file is the whole module.
 * `npm run demo-client` writes them; test/unit/demo-client.test.ts fails while a copy is stale.
 */
export const DEMO_CLIENT_MODULES: readonly { from: string; to: string }[] = [{ from: 'packages/client/src/media.ts', to: 'demo/mediaSession.js' }];

export function demoClientModule(root: URL, from: string): string {
  const source = readFileSync(new URL(from, root), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: true, removeComments: false },
    fileName: from,
  });
  return `// Generated from ${from} by \`npm run demo-client\`: edit that file, not this one.\n${outputText}`;
}
