import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Parser, fromFile } from '@asyncapi/parser';
import { SCHEMA_ID_BASE } from '../../src/contracts/documents.js';

/**
 * The checked-in contracts as a tool reads them (docs/api.md "Contracts"): docs/openapi.json has zero
 * findings from Spectral (spectral:oas, .spectral.yaml) nor from Redocly (recommended, redocly.yaml), whatever
 * operations it holds; docs/asyncapi.json parses with the official AsyncAPI parser without errors
 * or warnings, its $refs to docs/schemas/ resolved; every JSON Schema has its $id; both
 * documents carry package.json's version. (documents.test.ts keeps the files equal to what the
 * code generates.)
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const bin = (name: string) => join(root, 'node_modules/.bin', name);
const run = promisify(execFile);
const quietEnv = { ...process.env, NO_COLOR: '1' };
const readJson = (path: string) => JSON.parse(readFileSync(join(root, path), 'utf8')) as Record<string, any>;

describe('OpenAPI linters', () => {
  it('Spectral (spectral:oas): no finding of any severity', async () => {
    const ruleset = readFileSync(join(root, '.spectral.yaml'), 'utf8');
    expect(ruleset).toMatch(/extends:.*spectral:oas/);
    const out = await run(bin('spectral'), ['lint', '-r', '.spectral.yaml', '-f', 'json', '--fail-severity', 'hint', 'docs/openapi.json'], {
      cwd: root,
      env: quietEnv,
      maxBuffer: 32 << 20,
    }).catch((e: { stdout: string; code: number }) => e);
    const findings = JSON.parse(out.stdout.slice(out.stdout.indexOf('['), out.stdout.lastIndexOf(']') + 1)) as { code: string; message: string; path: string[] }[];
    expect(findings.map((f) => `${f.code} at ${f.path.join('.')}: ${f.message}`)).toEqual([]);
  }, 120_000);

  // Redocly's recommended rules read what Spectral does not, e.g. that the bodies of a `oneOf`
  // exclude each other (the one-to-one and the group create). Offline: no telemetry, no update check.
  const redocly = (file: string) =>
    run(bin('redocly'), ['lint', '--config', 'redocly.yaml', '--format', 'json', file], {
      cwd: root,
      env: { ...quietEnv, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      maxBuffer: 32 << 20,
    })
      .catch((e: { stdout: string }) => e)
      .then((out) => JSON.parse(out.stdout) as { problems: { ruleId: string; message: string; location: { pointer: string }[] }[] });

  it('Redocly (recommended): no finding of any severity', async () => {
    expect(readFileSync(join(root, 'redocly.yaml'), 'utf8')).toMatch(/^extends:\n\s+- recommended$/m);
    const { problems } = await redocly('docs/openapi.json');
    expect(problems.map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
  }, 120_000);

  it('Redocly reports create bodies that overlap (the check can fail)', async () => {
    const doc = readJson('docs/openapi.json');
    // As they were before the bodies forbade each other's properties (zod shows a refused
    // property as `{}`, anything).
    doc.components.schemas.CreateGroupCall.properties.calleeUserId = {};
    delete doc.components.schemas.CreateOneToOneCall.properties.calleeUserIds;
    delete doc.components.schemas.CreateOneToOneCall.properties.title;
    const dir = mkdtempSync(join(tmpdir(), 'redocly-'));
    try {
      writeFileSync(join(dir, 'openapi.json'), JSON.stringify(doc));
      const { problems } = await redocly(join(dir, 'openapi.json'));
      expect(problems.map((p) => p.ruleId)).toContain('no-illogical-composition-keywords');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('OpenAPI content', () => {
  const doc = readJson('docs/openapi.json');
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => ['get', 'put', 'post', 'delete', 'patch'].includes(method))
      .map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, op })),
  );

  it('every operation has a summary, a description, a tag and examples for its bodies', () => {
    expect(operations.length).toBeGreaterThan(5);
    for (const { where, op } of operations) {
      expect(op.summary, where).toMatch(/\S/);
      expect(op.description, where).toMatch(/\S/);
      expect(op.tags?.length, where).toBeGreaterThan(0);
      const bodies = [op.requestBody, ...Object.values(op.responses as Record<string, any>)].filter((b) => b?.content);
      for (const b of bodies) for (const [type, media] of Object.entries(b.content as Record<string, any>)) expect(media.examples ?? media.example, `${where} ${type}`).toBeDefined();
    }
  });

  it('events are typed by reference to the event schemas', () => {
    const page = doc.components.schemas.CallEventsPage;
    expect(page.properties.events.items).toEqual({ $ref: '#/components/schemas/CallEvent' });
    expect(page.required).toEqual(expect.arrayContaining(['events', 'nextCursor', 'hasMore']));
    const variants = doc.components.schemas.CallEvent.oneOf.map((r: { $ref: string }) => r.$ref);
    expect(variants).toEqual(['CallInvited', 'CallAccepted', 'CallEnded', 'CallRenamed', 'CallRinging', 'CallParticipant', 'CallMoved'].map((n) => `#/components/schemas/${n}`));
    const limit = doc.paths['/v1/call-events'].get.parameters.find((p: { name: string }) => p.name === 'limit');
    expect(limit.schema).toEqual({ type: 'integer', minimum: 1, maximum: 500, default: 100 });
    expect(limit.description).toMatch(/entries/);
  });
});

describe('AsyncAPI document of /v1/signaling', () => {
  it('parses with @asyncapi/parser: no error or warning, schema $refs resolved', async () => {
    const { document, diagnostics } = await fromFile(new Parser(), join(root, 'docs/asyncapi.json')).parse();
    // Severity 0 is an error, 1 a warning (2 and 3 are information and hints).
    expect(diagnostics.filter((d) => d.severity <= 1).map((d) => `${d.code}: ${d.message} at ${d.path.join('.')}`)).toEqual([]);
    expect(document).toBeDefined();
    expect(document!.version()).toBe('3.0.0');
    const event = document!.components().messages().get('event')!;
    const variants = (event.payload()!.json() as { properties: { event: { oneOf: { title: string; $id: string }[] } } }).properties.event.oneOf;
    const events = ['call.invited', 'call.accepted', 'call.ended', 'call.renamed', 'call.ringing', 'call.participant', 'call.moved', 'call.missed'];
    expect(variants.map((v) => v.title)).toEqual(events);
    expect(variants.map((v) => v.$id)).toEqual(events.map((n) => `${SCHEMA_ID_BASE}${n}.json`));
    const channel = document!.channels().get('signaling')!;
    expect(channel.address()).toBe('/v1/signaling');
    expect(channel.messages().all().map((m) => m.id()).sort()).toEqual(
      ['answerCommand', 'endCommand', 'error', 'event', 'gap', 'inviteCommand', 'message', 'messageCommand', 'moveCommand', 'ping', 'pong', 'renameCommand', 'reply', 'ringingCommand', 'signal', 'signalSend', 'synced'],
    );
    // A command frame is its route's body plus type and callId.
    const answerFrame = document!.components().messages().get('answerCommand')!.payload()!.json() as { required: string[] };
    expect(answerFrame.required.sort()).toEqual(['callId', 'installationId', 'operationId', 'type']);
    const closeCodes = (readJson('docs/asyncapi.json').channels.signaling['x-close-codes'] as { code: number }[]).map((c) => c.code);
    expect(closeCodes).toEqual([1000, 1001, 1009, 1011, 1013, 4000, 4001, 4008, 4010, 4029]);
  }, 60_000);

  it('a broken $ref is an error the parser reports (the check can fail)', async () => {
    const doc = readJson('docs/asyncapi.json');
    doc.components.messages.event.payload.properties.event.oneOf[0].$ref = './schemas/no-such-schema.json';
    const { diagnostics } = await new Parser().parse(JSON.stringify(doc), { source: join(root, 'docs/asyncapi.json') });
    expect(diagnostics.some((d) => d.severity === 0)).toBe(true);
  }, 60_000);
});

describe('versions and schema ids', () => {
  it('info.version of both documents is package.json’s version', () => {
    const { version } = readJson('package.json') as { version: string };
    expect(readJson('docs/openapi.json').info.version).toBe(version);
    expect(readJson('docs/asyncapi.json').info.version).toBe(version);
  });

  it('every JSON Schema in docs/schemas has an $id naming its file', () => {
    const files = readdirSync(join(root, 'docs/schemas')).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThanOrEqual(6);
    for (const f of files) expect(readJson(`docs/schemas/${f}`).$id, f).toBe(`${SCHEMA_ID_BASE}${f}`);
  });
});
