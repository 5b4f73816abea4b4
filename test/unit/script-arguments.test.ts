import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { argumentBindings, argv, LUA_DIR, loadScriptSource, scriptDefinitions, scriptFile, type ScriptName } from '../../src/redis/scripts.js';

/**
 * Script arguments are named (src/redis/scripts.ts scriptDefinitions): one list per script gives
 * their order, the loader binds them to Lua locals of the same names at `--@arguments`, and
 * runScript lays a call's named arguments out in that order. These checks fail when a script and
 * its definition disagree: a script that reads ARGV by position, a declared name it never uses
 * (a rename on one side only), or a header that does not document a name.
 */
const names = Object.keys(scriptDefinitions) as ScriptName[];
const luaFiles = readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua'));
const includeFiles = readdirSync(join(LUA_DIR, 'includes')).filter((f) => f.endsWith('.lua'));

describe('named script arguments', () => {
  it('every script in lua/ has a definition, and every definition a script', () => {
    expect(luaFiles.sort()).toEqual(names.map(scriptFile).sort());
  });

  it('no script or include reads an argument by a fixed position', () => {
    for (const f of [...luaFiles, ...includeFiles.map((i) => join('includes', i))]) {
      expect(readFileSync(join(LUA_DIR, f), 'utf8'), f).not.toMatch(/ARGV\[\d/);
    }
  });

  it.each(names)('%s: binds its arguments once, uses each, and its header names each', (name) => {
    const raw = readFileSync(join(LUA_DIR, scriptFile(name)), 'utf8');
    expect(raw.match(/^--@arguments\s*$/gm), 'one --@arguments line').toHaveLength(1);
    const source = loadScriptSource(name);
    const bindings = argumentBindings(name);
    const after = source.slice(source.indexOf(bindings) + bindings.length);
    const def: { args: readonly string[]; rest?: string; traced?: boolean } = scriptDefinitions[name];
    const bound = [...def.args, ...(def.traced ? ['traceparent'] : []), ...(def.rest ? [`${def.rest}From`] : [])];
    for (const a of bound) expect(after, `${name} never uses ${a}`).toMatch(new RegExp(`\\b${a}\\b`));
    const header = raw.slice(0, raw.indexOf(']]'));
    for (const a of [...def.args, ...(def.rest ? [def.rest] : [])]) expect(header, `${name}'s header does not name ${a}`).toMatch(new RegExp(`\\b${a}\\b`));
  });

  it('the bindings and a call lay the names out in the same order', () => {
    for (const name of names) {
      const def: { args: readonly string[]; rest?: string } = scriptDefinitions[name];
      const named = Object.fromEntries([...def.args.map((a) => [a, a]), ...(def.rest ? [[def.rest, ['r1', 'r2']]] : [])]);
      const laidOut = argv(name, named as never);
      const bindings = argumentBindings(name);
      def.args.forEach((a, i) => {
        expect(laidOut[i]).toBe(a);
        if (i === 0) expect(bindings).toMatch(new RegExp(`^local ${a}[ ,]`));
      });
      if (def.args.length > 0) expect(bindings).toContain(`= ${def.args.map((_, i) => `ARGV[${i + 1}]`).join(', ')}`);
      if (def.rest) {
        expect(laidOut.slice(def.args.length)).toEqual(['r1', 'r2']);
        expect(bindings).toContain(`local ${def.rest}From = ${def.args.length + 1}`);
      }
    }
  });

  it('a call with a name the script does not take, or without one it does, is refused', () => {
    const ok = { userId: 'u', retention: 'r', earlyNotice: '' };
    expect(argv('readCall', ok)).toEqual(['u', 'r', '']);
    expect(() => argv('readCall', { ...ok, extra: 'x' } as never)).toThrow(/readCall takes userId, retention, earlyNotice; got/);
    expect(() => argv('readCall', { userId: 'u', retention: 'r' } as never)).toThrow(/readCall takes/);
    expect(() => argv('readCall', { ...ok, earlyNotice: undefined } as never)).toThrow(/readCall takes/);
  });
});
