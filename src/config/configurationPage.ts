import { configSchema } from './config.js';

/**
 * docs/configuration.md, generated from the one configuration schema (`npm run docs`): each
 * variable's default is what the schema parses from an unset value, and its meaning is the
 * schema's own description, so the page cannot drift from the code (a test compares them).
 */

/** An unset variable's parsed value, as the page shows it. */
function shownDefault(value: unknown): string {
  if (value === undefined || value === '') return '—';
  if (Array.isArray(value)) return value.length ? `\`${value.join(',')}\`` : '—';
  return `\`${String(value)}\``;
}

/** Every variable, in schema order: name, default as shown, meaning. */
export function configurationRows(): { name: string; shownDefault: string; meaning: string }[] {
  return Object.entries(configSchema.shape).map(([name, schema]) => {
    const parsed = schema.safeParse(undefined);
    return {
      name,
      shownDefault: parsed.success ? shownDefault(parsed.data) : 'required',
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
