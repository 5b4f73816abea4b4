import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'svix';

/**
 * A real webhook receiver for the tests (docs/webhooks.md "Verifying a webhook"). Every request
 * is verified with the svix package's own verifier (svix 1.82, which predates its use of the
 * `standardwebhooks` package the server signs with) against the receiver's secrets, and a
 * request that fails verification gets 400 as a real receiver would answer it. What the
 * receiver answers otherwise is the test's to choose.
 */

export const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

export interface ReceivedWebhook {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  json: any;
  /** Which of the receiver's secrets verified it (svix), by index; empty when none did. */
  verifiedBy: number[];
  atMs: number;
}

export type Answer = { status: number; headers?: Record<string, string> } | 'hang';

export interface WebhookReceiver {
  url: string;
  received: ReceivedWebhook[];
  /** Verified requests only, deduplicated by webhook-id (what a receiver would process). */
  unique(): Map<string, ReceivedWebhook>;
  /** Decides each verified request's answer (default: 204). */
  answer: (r: ReceivedWebhook) => Answer;
  /** Answers every request left hanging with `status`. */
  releaseHung(status?: number): void;
  close(): Promise<void>;
}

/** Verifies a request as svix does (throws when it does not verify). */
export function svixVerify(secret: string, r: Pick<ReceivedWebhook, 'id' | 'timestamp' | 'signature' | 'body'>): unknown {
  return new Webhook(secret).verify(r.body, { 'webhook-id': r.id, 'webhook-timestamp': r.timestamp, 'webhook-signature': r.signature });
}

/** The same check with node:crypto alone: does one of the `v1,` signatures match? */
export function hmacMatches(secret: string, r: Pick<ReceivedWebhook, 'id' | 'timestamp' | 'signature' | 'body'>): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${r.id}.${r.timestamp}.${r.body}`).digest('base64');
  return r.signature.split(' ').some((s) => s === `v1,${expected}`);
}

export async function startWebhookReceiver(secrets: string[]): Promise<WebhookReceiver> {
  const hung: ServerResponse[] = [];
  const receiver: WebhookReceiver = {
    url: '',
    received: [],
    answer: () => ({ status: 204 }),
    unique() {
      const out = new Map<string, ReceivedWebhook>();
      for (const r of this.received) if (r.verifiedBy.length > 0 && !out.has(r.id)) out.set(r.id, r);
      return out;
    },
    releaseHung(status = 204) {
      for (const res of hung.splice(0)) if (!res.writableEnded) res.writeHead(status).end();
    },
    close: () =>
      new Promise<void>((resolve) => {
        receiver.releaseHung(503);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const r: ReceivedWebhook = {
        id: String(req.headers['webhook-id'] ?? ''),
        timestamp: String(req.headers['webhook-timestamp'] ?? ''),
        signature: String(req.headers['webhook-signature'] ?? ''),
        body,
        json: undefined,
        verifiedBy: [],
        atMs: Date.now(),
      };
      secrets.forEach((secret, i) => {
        try {
          r.json = svixVerify(secret, r);
          r.verifiedBy.push(i);
        } catch {
          // Not signed with this secret.
        }
      });
      receiver.received.push(r);
      if (r.verifiedBy.length === 0) return res.writeHead(400).end('signature does not verify');
      const answer = receiver.answer(r);
      if (answer === 'hang') return hung.push(res);
      res.writeHead(answer.status, answer.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}
