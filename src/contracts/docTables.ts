import { z } from 'zod';
import { CALL_COMMANDS } from '../commands/callCommands.js';
import { errorCatalogue, type ErrorCode } from '../commands/errors.js';
import { asyncApiDocument } from './asyncapi.js';
import { openApiDocument } from './openapi.js';

/**
 * The tables of the hand-written pages that have one source in the code, written by `npm run docs`
 * between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` (fillRegions); a test fails while
 * a page's copy is stale (test/unit/generated-pages.test.ts). Each is built from what the server
 * runs: the command registry, the error catalogue, and the OpenAPI and AsyncAPI documents built
 * from the same schemas.
 */

interface Operation {
  method: string;
  path: string;
  operationId: string;
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { examples?: Record<string, unknown> }> }>;
}
interface Schema {
  $ref?: string;
  oneOf?: Schema[];
  properties?: Record<string, unknown>;
  required?: string[];
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** The OpenAPI document, built once per process (it is a pure function of the code). */
let built: Record<string, unknown> | undefined;
const openApi = () => (built ??= openApiDocument() as Record<string, unknown>);

/** Every operation of the OpenAPI document, in document order. */
function operations(): Operation[] {
  const doc = openApi() as { paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>> };
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ ...op, method: method.toUpperCase(), path })),
  );
}

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  const doc = openApi() as { components: { schemas: Record<string, Schema> } };
  return doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]!;
}

const route = (op: Pick<Operation, 'method' | 'path'>) => `\`${op.method} ${op.path}\``;
const key = (op: Pick<Operation, 'method' | 'path'>) => `${op.method} ${op.path}`;

/** The codes an operation's problem responses list. */
function problemCodes(op: Operation): Set<string> {
  const codes = new Set<string>();
  for (const response of Object.values(op.responses)) for (const code of Object.keys(response.content?.['application/problem+json']?.examples ?? {})) codes.add(code);
  return codes;
}

/** A command's route as the OpenAPI document has it: `POST /v1/calls/{id}/<path>`. */
function commandRoute(path: string): Operation {
  const op = operations().find((o) => o.method === 'POST' && o.path === `/v1/calls/{id}/${path}`);
  if (!op) throw new Error(`no OpenAPI operation POST /v1/calls/{id}/${path}`);
  return op;
}

/** The frame types of the AsyncAPI document, by direction: what a client sends, what it receives. */
export function asyncApiFrameTypes(): { send: string[]; receive: string[] } {
  const doc = asyncApiDocument() as {
    operations: Record<string, { action: 'send' | 'receive'; messages: { $ref: string }[] }>;
    components: { messages: Record<string, { payload: { properties: { type: { const: string } } } }> };
  };
  const out = { send: [] as string[], receive: [] as string[] };
  for (const op of Object.values(doc.operations)) {
    for (const m of op.messages) out[op.action].push(doc.components.messages[m.$ref.split('/').pop()!]!.payload.properties.type.const);
  }
  return out;
}

/** A body's fields as a table cell: `a`, `b`, `c`? (optional ones marked). */
function fields(schema: z.ZodType): string {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.keys(json.properties ?? {})
    .map((f) => `\`${f}\`${json.required?.includes(f) ? '' : '?'}`)
    .join(', ');
}

/** What a command's 200 body is, by the OpenAPI response's schema. */
function replyBody(op: Operation): string {
  const ok = op.responses['200']?.content?.['application/json'] as { schema?: Schema } | undefined;
  const name = ok?.schema?.$ref?.replace('#/components/schemas/', '');
  return name === 'CallSnapshot' ? 'the call’s snapshot' : name ? `\`${name}\`` : 'no body';
}

/**
 * docs/signaling.md "Commands": one row per frame a client sends in the AsyncAPI document. A
 * command frame runs the command of that name (src/commands/callCommands.ts) and is its route's
 * body plus `type` and `callId`. A frame type the AsyncAPI document sends that is neither `ping`,
 * `signal` nor a command stops the generation.
 */
export function commandsTable(): string {
  const rows = ['| frame `type` | HTTP route | fields besides `type`, `callId` | `reply` body on success |', '|---|---|---|---|'];
  for (const type of asyncApiFrameTypes().send) {
    if (type === 'ping') {
      rows.push('| `ping` | — (keepalive) | — | none: answered with a `pong` frame |');
      continue;
    }
    if (type === 'signal') {
      rows.push('| `signal` | — ([live signal](#live-signals)) | `kind`, `value` | none: not answered; an `error` frame when refused |');
      continue;
    }
    const command = CALL_COMMANDS.get(type);
    if (!command) throw new Error(`AsyncAPI has a client frame "${type}" that is no command (src/commands/callCommands.ts)`);
    const op = commandRoute(command.path);
    rows.push(`| \`${type}\` | ${route(op)} | ${fields(command.body)} | ${replyBody(op)} |`);
  }
  for (const name of CALL_COMMANDS.keys()) if (!asyncApiFrameTypes().send.includes(name)) throw new Error(`command "${name}" has no frame in AsyncAPI`);
  return rows.join('\n');
}

/** Codes every operation lists (the session check, the abuse limits, a failure): not repeated per row. */
function where(code: ErrorCode, ops: Operation[], lists: Map<string, Set<string>>): string {
  const having = ops.filter((op) => lists.get(key(op))!.has(code));
  if (having.length === 0) return ROUTER_ONLY[code] ?? '—';
  const frames = [...CALL_COMMANDS.values()].filter((c) => lists.get(key(commandRoute(c.path)))!.has(code)).map((c) => `\`${c.name}\``);
  const framesText = frames.length === 0 ? '' : `; frame${frames.length === 1 ? '' : 's'} ${frames.join(', ')}`;
  if (having.length === ops.length) return `every route${frames.length === CALL_COMMANDS.size ? ' and frame' : framesText}`;
  if (having.length > ops.length / 2) {
    const missing = ops.filter((op) => !having.includes(op)).map(route);
    return `every route but ${missing.join(', ')}${frames.length === CALL_COMMANDS.size ? '; every frame' : framesText}`;
  }
  return `${having.map(route).join(', ')}${framesText}`;
}

/** Codes the router answers before any route's handler runs, so no operation lists them. */
const ROUTER_ONLY: Partial<Record<ErrorCode, string>> = {
  method_not_allowed: 'any known path, with a method it does not take',
};

/**
 * docs/api.md "Errors": one row per code of the error catalogue, its status, when it is answered
 * (the catalogue's `when`), and which routes and command frames may answer it (their OpenAPI
 * responses; a frame answers what its route does).
 */
export function errorsTable(): string {
  const ops = operations().filter((op) => op.path.startsWith('/v1/') && !op.path.startsWith('/v1/server/'));
  const serverOps = operations().filter((op) => op.path.startsWith('/v1/server/'));
  const lists = new Map([...ops, ...serverOps].map((op) => [key(op), problemCodes(op)]));
  const rows = ['| code | status | when | returned by (device routes and frames; `/v1/server/` routes) |', '|---|---|---|---|'];
  for (const [code, entry] of Object.entries(errorCatalogue) as [ErrorCode, (typeof errorCatalogue)[ErrorCode]][]) {
    const server = serverOps.filter((op) => lists.get(key(op))!.has(code)).length;
    const serverText = server === 0 ? '' : server === serverOps.length ? '; every server route' : `; ${server} server route${server === 1 ? '' : 's'}`;
    rows.push(`| \`${code}\` | ${entry.status} | ${entry.when} | ${where(code, ops, lists)}${serverText} |`);
  }
  return rows.join('\n');
}

/**
 * docs/api.md "Idempotency": the requests whose body takes an `operationId`, by their OpenAPI
 * request schemas (a `oneOf` counts when every variant takes one).
 */
export function idempotentOperations(): { route: string; operationId: string; required: boolean; frame?: string }[] {
  const out: { route: string; operationId: string; required: boolean; frame?: string }[] = [];
  for (const op of operations()) {
    const body = op.requestBody?.content['application/json']?.schema;
    if (!body) continue;
    const top = resolve(body);
    const variants = (top.oneOf ?? [top]).map(resolve);
    if (!variants.every((v) => v.properties && 'operationId' in v.properties)) continue;
    const frame = [...CALL_COMMANDS.values()].find((c) => op.method === 'POST' && op.path === `/v1/calls/{id}/${c.path}`)?.name;
    out.push({ route: route(op), operationId: op.operationId, required: variants.every((v) => v.required?.includes('operationId')), ...(frame ? { frame } : {}) });
  }
  return out;
}

export function idempotencyList(): string {
  return idempotentOperations()
    .map((o) => `- ${o.route} (\`${o.operationId}\`${o.frame ? `; the \`${o.frame}\` frame` : ''})${o.required ? '' : ': optional; used when the request is the callee\'s answer (`MEDIA_SESSION_ANSWERS`), which without one is idempotent per installation'}`)
    .join('\n');
}

/**
 * A page with each `<!-- generated:NAME -->` … `<!-- /generated:NAME -->` region's content
 * replaced. A region the page lacks is an error: the generator must not silently write nothing.
 */
export function fillRegions(page: string, regions: Record<string, string>, name = 'page'): string {
  let out = page;
  for (const [region, content] of Object.entries(regions)) {
    const re = new RegExp(`(<!-- generated:${region} [^\\n]*-->\\n)[\\s\\S]*?(\\n<!-- /generated:${region} -->)`);
    if (!re.test(out)) throw new Error(`${name} has no region ${region} (<!-- generated:${region} … --> … <!-- /generated:${region} -->)`);
    out = out.replace(re, (_m, open: string, close: string) => `${open}${content}${close}`);
  }
  return out;
}
