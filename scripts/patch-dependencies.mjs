#!/usr/bin/env node
/**
 * Runs after `npm install` / `npm ci` (package.json "postinstall"): mends, in node_modules, a
 * dependency's code that costs this server dearly, until its maintainers release a fix (docs/development.md
 * "Installed dependency patch"). Each patch replaces one exact piece of code and is idempotent;
 * when the piece is not there (a release changed it), it says so and leaves the file alone.
 * `--check` only reports, and exits 1 unless every patch is in place:
 * test/unit/dependency-patches.test.ts runs it, so an upgrade that drops a patch fails the tests.
 *
 * ioredis (5.x, 6.0) gives every Pipeline an own `length` getter, a new closure per pipeline. V8
 * then makes a hidden class per pipeline, held by the shared class's transitions until the next
 * full collection; the getter's closure holds the pipeline, so each pipeline, its commands,
 * their arguments and replies survive every young-generation collection until then. Every
 * auto-pipelined command is in such a pipeline. A getter on the prototype does the same without it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

const PATCHES = [
  {
    name: 'ioredis Pipeline: `length` as a prototype getter',
    file: 'ioredis/built/Pipeline.js',
    before: `        const _this = this;
        Object.defineProperty(this, "length", {
            get: function () {
                return _this._queue.length;
            },
        });
    }
`,
    after: `    }
    // Patched by scripts/patch-dependencies.mjs: one getter for every pipeline.
    get length() {
        return this._queue.length;
    }
`,
  },
];

/** Applies each patch (with `write` false, only says what applying would do). */
function applyPatches(write) {
  return PATCHES.map((p) => {
    let path;
    try {
      path = require.resolve(p.file);
    } catch {
      return { name: p.name, outcome: 'not installed' };
    }
    const text = readFileSync(path, 'utf8');
    if (text.includes(p.after)) return { name: p.name, outcome: 'already applied' };
    if (!text.includes(p.before)) return { name: p.name, outcome: 'code not found' };
    if (!write) return { name: p.name, outcome: 'not applied' };
    writeFileSync(path, text.replace(p.before, p.after));
    return { name: p.name, outcome: 'applied' };
  });
}

const check = process.argv.includes('--check');
const results = applyPatches(!check);
for (const r of results) {
  const line = `patch-dependencies: ${r.name}: ${r.outcome}`;
  if (r.outcome === 'code not found') console.warn(`${line} (the installed release differs: see scripts/patch-dependencies.mjs)`);
  else console.log(line);
}
if (check && results.some((r) => r.outcome !== 'already applied')) process.exitCode = 1;
