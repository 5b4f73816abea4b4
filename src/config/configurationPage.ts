import type { z } from 'zod';
import { configSchema } from './config.js';

/**
 * docs/configuration.md, generated from the one configuration schema (`npm run docs`): each
 * variable's default is the schema's own default as written (the text an operator would set, not
 * what it parses into), and its meaning is the schema's description, so the page cannot drift
 * from the code. test/unit/configuration-page.test.ts reads the page back and sets every shown
 * default through the schema.
 */

interface SchemaDef {
  type: string;
  defaultValue?: unknown;
  in?: { _zod: { def: SchemaDef } };
  innerType?: { _zod: { def: SchemaDef } };
}

/**
 * The default a variable's schema applies when it is unset, as written in the schema: the
 * `.default()` at the start of its chain (before any transform or pipe), or undefined.
 */
function writtenDefault(schema: z.ZodType): unknown {
  let def: SchemaDef | undefined = (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;
  while (def) {
    if (def.type === 'default') return def.defaultValue;
    def = (def.in ?? def.innerType)?._zod.def;
  }
  return undefined;
}

/** A default as the page shows it: the environment text, or a dash for unset. */
function shownDefault(value: unknown): string {
  return value === undefined || value === '' ? '—' : `\`${String(value)}\``;
}

/** Every variable, in schema order: name, default as shown, meaning. */
export function configurationRows(): { name: string; shownDefault: string; meaning: string }[] {
  return Object.entries(configSchema.shape).map(([name, schema]) => {
    return {
      name,
      shownDefault: schema.safeParse(undefined).success ? shownDefault(writtenDefault(schema)) : 'required',
      meaning: (schema.description ?? '').replace(/\|/g, '\\|'),
    };
  });
}

export function configurationPage(): string {
  const rows = configurationRows().map((r) => `| \`${r.name}\` | ${r.shownDefault} | ${r.meaning} |`);
  return [
    '# Configuration',
    '',
    '<!-- Generated from the configuration schema (src/config/config.ts) by `npm run docs`; a test fails when this page and the schema disagree. Edit the schema, not this page. -->',
    '',
    'Every setting is an environment variable, read once at start and validated: a bad value stops',
    'the process with a message that names the variable. With `NODE_ENV=production` nothing falls',
    'back to a development default: without `REDIS_URL` (or `REDIS_CLUSTER_NODES`) and one of the',
    '`AUTH_*` keys the process exits with status 2. A dash means unset.',
    '',
    '| Variable | Default | Meaning |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
