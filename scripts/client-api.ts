/**
 * The client package's API list in its README (its API section), generated from
 * its types by TypeDoc: every public method and accessor of its exported classes, and every event
 * (the `on…` callbacks and `saveCursor` of SignalingOptions), each with the first paragraph of its
 * doc comment. `npm run client-api` rewrites the README's section;
 * test/unit/client-readme-api.test.ts fails when the README and the types differ.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Application, ReflectionKind, type Comment, type DeclarationReflection, type SignatureReflection } from 'typedoc';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CLIENT_README = `${ROOT}packages/client/README.md`;
const BEGIN = '<!-- api:begin: generated from the types by `npm run client-api`; do not edit by hand -->';
const END = '<!-- api:end -->';

function summary(comment: Comment | undefined): string {
  const text = (comment?.summary ?? []).map((p) => p.text).join('').trim();
  const first = text.split(/\n\s*\n/)[0] ?? '';
  return first.replace(/\s*\n\s*/g, ' ').trim();
}

function signature(name: string, sig: SignatureReflection): string {
  const params = (sig.parameters ?? []).map((p) => `${p.name}${p.flags.isOptional || p.defaultValue !== undefined ? '?' : ''}: ${p.type?.toString() ?? 'unknown'}`);
  return `${name}(${params.join(', ')}): ${sig.type?.toString() ?? 'void'}`;
}

const line = (code: string, text: string) => `- \`${code.replace(/\s+/g, ' ')}\`${text ? `: ${text}` : ''}`;

/** The README section, from packages/client/src/index.ts's exports. */
export async function clientApiMarkdown(): Promise<string> {
  const app = await Application.bootstrap({
    entryPoints: [`${ROOT}packages/client/src/index.ts`],
    tsconfig: `${ROOT}packages/client/tsconfig.json`,
    excludePrivate: true,
    excludeProtected: true,
    excludeInternal: true,
    logLevel: 'Error',
  });
  const project = await app.convert();
  if (!project) throw new Error('TypeDoc could not read packages/client/src');
  const out: string[] = [BEGIN, ''];
  const classes = (project.getChildrenByKind(ReflectionKind.Class) as DeclarationReflection[]).sort((a, b) => a.name.localeCompare(b.name));
  for (const cls of classes) {
    const members = (cls.children ?? []).filter((m) => !m.flags.isPrivate && !m.flags.isProtected && !m.name.startsWith('_') && !m.inheritedFrom);
    const lines: string[] = [];
    for (const m of members) {
      if (m.kindOf(ReflectionKind.Method)) for (const sig of m.signatures ?? []) lines.push(line(signature(m.name, sig), summary(sig.comment ?? m.comment)));
      else if (m.kindOf(ReflectionKind.Accessor) && m.getSignature) lines.push(line(`${m.name}: ${m.getSignature.type?.toString() ?? 'unknown'}`, summary(m.getSignature.comment ?? m.comment)));
      else if (m.kindOf(ReflectionKind.Property) && !m.flags.isPrivate) lines.push(line(`${m.name}: ${m.type?.toString() ?? 'unknown'}`, summary(m.comment)));
    }
    if (lines.length === 0) continue;
    out.push(`### ${cls.name}`, '', ...(summary(cls.comment) ? [summary(cls.comment), ''] : []), ...lines, '');
  }
  const options = project.getChildByName('SignalingOptions') as DeclarationReflection | undefined;
  if (!options) throw new Error('SignalingOptions is not exported');
  const events = (options.children ?? []).filter((p) => /^on[A-Z]/.test(p.name) || p.name === 'saveCursor');
  out.push('### Events (SignalingOptions callbacks)', '', ...events.map((p) => line(`${p.name}${p.flags.isOptional ? '?' : ''}: ${p.type?.toString() ?? 'unknown'}`, summary(p.comment))), '', END);
  return out.join('\n');
}

/** The README with its API section replaced by `section`. */
export function withApiSection(readme: string, section: string): string {
  const start = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`${CLIENT_README}: no ${BEGIN} … ${END} section`);
  return readme.slice(0, start) + section + readme.slice(end + END.length);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const readme = readFileSync(CLIENT_README, 'utf8');
  writeFileSync(CLIENT_README, withApiSection(readme, await clientApiMarkdown()));
  process.stdout.write(`wrote the API section of ${CLIENT_README}\n`);
}
