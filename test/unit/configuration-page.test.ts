import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configSchema, loadConfig } from '../../src/config/config.js';
import { configurationRows } from '../../src/config/configurationPage.js';

/**
 * docs/configuration.md is generated from the configuration schema: every variable the schema
 * reads has a row on the checked-in page, with a meaning, and the page names no variable the
 * schema does not read. (test/unit/documents.test.ts also checks the page is exactly what
 * `npm run docs` writes.)
 */
const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
const pageVariables = [...page.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]);

describe('docs/configuration.md', () => {
  it('has a row for every variable of the schema, and no other', () => {
    expect(pageVariables.sort()).toEqual(Object.keys(configSchema.shape).sort());
  });

  it('gives every variable a meaning', () => {
    const undocumented = configurationRows().filter((r) => r.meaning.trim().length < 10).map((r) => r.name);
    expect(undocumented).toEqual([]);
  });

  it('shows the default the schema applies', () => {
    const row = (name: string) => new RegExp(`^\\| \`${name}\` \\| ([^|]+) \\|`, 'm').exec(page)?.[1]?.trim();
    expect(row('PORT')).toBe('`8080`');
    expect(row('ROLES')).toBe('`api,gateway,worker`');
    expect(row('CALL_WAITING')).toBe('`false`');
    expect(row('REDIS_URL')).toBe('—');
    expect(row('WEBHOOK_RETRY_SCHEDULE')).toBe('`5s,5m,30m,2h,5h,10h,10h`');
  });

  it('every default the page shows is accepted by the configuration parser as written, and means what unset means', () => {
    // Read back from the page itself, not from the generator, so a generator that prints a
    // default in another form than the environment takes (a parsed list, a number) fails here.
    const shown = [...page.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \| ([^|]+) \|/gm)].map((m) => [m[1]!, m[2]!.trim()] as const);
    expect(shown.length).toBe(Object.keys(configSchema.shape).length);
    const unset = loadConfig({});
    const all: Record<string, string> = {};
    for (const [name, cell] of shown) {
      if (cell === '—') continue;
      const value = /^`([^`]+)`$/.exec(cell)?.[1];
      expect(value, `${name}: the default cell is a dash or one value in backticks, not ${cell}`).toBeDefined();
      all[name] = value!;
      let parsed: ReturnType<typeof loadConfig> | undefined;
      expect(() => (parsed = loadConfig({ [name]: value })), `${name}=${value}`).not.toThrow();
      expect(parsed![name as keyof typeof parsed], `${name}=${value}`).toEqual(unset[name as keyof typeof unset]);
    }
    expect(Object.keys(all).length).toBeGreaterThan(40);
    expect(loadConfig(all)).toEqual(unset);
  });
});
