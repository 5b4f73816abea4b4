import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { generatedDocuments } from '../../src/contracts/documents.js';
import { openApiDocument } from '../../src/contracts/openapi.js';
import { apiRoutes } from '../../src/roles/api.js';
import { errorCatalogue } from '../../src/commands/errors.js';
import type { ApiDeps } from '../../src/http/deps.js';

const root = new URL('../../', import.meta.url);

describe('generated interface documents', () => {
  it('docs/openapi.json and docs/schemas are up to date (run `npm run docs`)', () => {
    for (const [path, text] of generatedDocuments()) {
      expect(readFileSync(new URL(path, root), 'utf8'), `${path} is stale`).toBe(text);
    }
  });

  it('the OpenAPI document validates as OpenAPI 3.1', async () => {
    const validator = new Validator();
    const result = await validator.validate(openApiDocument());
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('lists every endpoint the server mounts, with its method', () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, unknown>> };
    const verb = { get: 'get', post: 'post', put: 'put', del: 'delete' } as const;
    const routes = apiRoutes({} as ApiDeps);
    expect(routes.length).toBeGreaterThan(5);
    for (const r of routes) {
      const path = r.pattern.replace(/:([A-Za-z]+)/g, '{$1}');
      expect(doc.paths[path], `${path} missing`).toBeDefined();
      expect(doc.paths[path]![verb[r.method]], `${r.method} ${path} missing`).toBeDefined();
    }
  });
});

describe('error catalogue', () => {
  it('docs/api.md lists exactly the catalogue codes with their statuses', () => {
    const readme = readFileSync(new URL('docs/api.md', root), 'utf8');
    const rows = [...readme.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    const catalogue = Object.entries(errorCatalogue).map(([code, e]) => [code, e.status]);
    expect(rows.sort()).toEqual(catalogue.sort());
  });
});
