import { readFileSync, readdirSync } from 'node:fs';
import { extname, join } from 'node:path';
import { packageDir } from '../util/packageDir.js';
import { z } from 'zod';
import type { Route } from '../http/router.js';
import { parseJsonBody } from '../http/request.js';
import { principalId } from '../commands/schemas.js';
import { mintToken } from '../auth/devTokens.js';

/**
 * The browser softphone (docs/development.md "Browser softphone"): the static files of `demo/` served at
 * /demo/ when DEMO=true, and, only in dev mode (`--dev`, never with NODE_ENV=production), a
 * token endpoint that signs session tokens with the dev secret so the page can sign in by user ID.
 */

/** `demo/` sits at the package root, both from `src/demo` and from `dist/src/demo`. */
export const DEMO_DIR = packageDir(import.meta.url, 'demo', 'index.html');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The page loads only its own files, and talks only to this server (HTTP and WebSocket: 'self'
 * covers ws: and wss: to the page's own host) and to the SFU's client URLs (`connectTo`).
 */
function securityHeaders(connectTo: readonly string[]): Record<string, string> {
  const connect = ["'self'", ...new Set(connectTo.map((u) => new URL(u).origin))].join(' ');
  return {
    'content-security-policy': `default-src 'self'; connect-src ${connect}; media-src 'self' blob: mediastream:; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  };
}

const tokenRequest = z.object({
  userId: principalId,
  name: z.string().trim().min(1).max(64).optional(),
  installationId: principalId.optional(),
});

export interface DemoOptions {
  /** The directory of the static files (the repository's `demo/`). */
  dir: string;
  /** The dev signing secret; undefined: no token endpoint (sign in by pasting a token). */
  devTokenSecret: string | undefined;
  /** URLs besides this server's the page connects to: the Janus client URLs (JANUS_CLIENT_URLS) its group calls' media goes through. */
  connectTo: readonly string[];
}

export function demoRoutes(opts: DemoOptions): Route[] {
  // Read once at start: a handful of small files, served from memory.
  const files = new Map<string, { body: string; type: string }>();
  for (const name of readdirSync(opts.dir)) {
    const type = TYPES[extname(name)];
    if (type) files.set(name, { body: readFileSync(join(opts.dir, name), 'utf8'), type });
  }
  const headers = securityHeaders(opts.connectTo);
  const serve = (name: string) => {
    const f = files.get(name);
    if (!f) return { status: 404, body: 'not found', contentType: 'text/plain; charset=utf-8' };
    return { status: 200, body: f.body, contentType: f.type, headers };
  };
  const routes: Route[] = [
    { method: 'get', pattern: '/demo', handler: () => ({ status: 302, headers: { location: '/demo/' } }) },
    { method: 'get', pattern: '/demo/', handler: () => serve('index.html') },
    { method: 'get', pattern: '/demo/:file', handler: (ctx) => serve(ctx.params[0] ?? '') },
    {
      method: 'get',
      pattern: '/demo-api/config',
      handler: () => ({ status: 200, body: JSON.stringify({ devTokens: opts.devTokenSecret !== undefined }) }),
    },
  ];
  const secret = opts.devTokenSecret;
  if (secret) {
    routes.push({
      method: 'post',
      pattern: '/demo-api/token',
      handler: (ctx) => {
        const body = parseJsonBody(ctx, tokenRequest);
        const installationId = body.installationId ?? `${body.userId}-web`;
        const ttlSeconds = 12 * 3600;
        const token = mintToken(secret, { sub: body.userId, iid: installationId, ...(body.name ? { name: body.name } : {}), ttlSeconds });
        return { status: 200, body: JSON.stringify({ token, userId: body.userId, installationId, expiresAtMs: Date.now() + ttlSeconds * 1000 }) };
      },
    });
  }
  return routes;
}
