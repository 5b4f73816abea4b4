import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'svix';
import { loadConfig } from '../../src/config/config.js';
import { configurationRows } from '../../src/config/configurationPage.js';
import { parseWebhookEndpoints, webhookEndpoints } from '../../src/webhooks/endpoints.js';
import { retryAfterMs } from '../../src/webhooks/deliverer.js';
import { PRIVATE_RANGES } from '../../src/webhooks/privateNetwork.js';
import { webhookBody, webhookId } from '../../src/webhooks/events.js';
import { newSecret } from '../support/webhook-receiver.js';
import { webhookSigner } from '../../src/webhooks/signature.js';
import { Webhook as Signer } from 'standardwebhooks';

/** WEBHOOKS and its neighbours (docs/webhooks.md "Configuration"), and the pieces of a delivery that need no server. */

const secret = newSecret();
const endpoint = (over: Record<string, unknown> = {}) => ({ id: 'billing', url: 'https://backend.example.com/hooks', secret, ...over });

describe('WEBHOOKS', () => {
  it('parses endpoints: one secret or two while rotating, all event types unless named', () => {
    const other = newSecret();
    const [a, b] = parseWebhookEndpoints(JSON.stringify([endpoint(), endpoint({ id: 'chat', secret: [other, secret], events: ['call.ended'] })]));
    expect(a).toEqual({ id: 'billing', url: 'https://backend.example.com/hooks', secrets: [secret], events: new Set(['call.created', 'call.accepted', 'call.ended', 'push.token_removed']) });
    expect(b).toMatchObject({ id: 'chat', secrets: [other, secret], events: new Set(['call.ended']) });
  });

  it.each([
    ['not JSON', '[', /WEBHOOKS: not JSON/],
    ['a bad secret', JSON.stringify([endpoint({ secret: 'whsec_short' })]), /endpoint "billing" secret: /],
    ['a secret without whsec_', JSON.stringify([endpoint({ secret: Buffer.alloc(32).toString('base64') })]), /endpoint "billing" secret/],
    ['an unknown event type', JSON.stringify([endpoint({ events: ['call.renamed'] })]), /endpoint "billing" events\.0/],
    ['a URL that is not http(s)', JSON.stringify([endpoint({ url: 'ftp://x' })]), /endpoint "billing" url/],
    ['an unknown field', JSON.stringify([endpoint({ retries: 3 })]), /endpoint "billing"/],
    ['no id', JSON.stringify([{ url: 'https://x', secret }]), /endpoint #1 id/],
    ['the same id twice', JSON.stringify([endpoint(), endpoint()]), /endpoint "billing" id: listed twice/],
  ])('refuses %s, naming the endpoint and the field', (_what, json, message) => {
    expect(() => parseWebhookEndpoints(json)).toThrow(message);
  });

  it('WEBHOOKS_FILE is read, and one of the two at most', () => {
    expect(webhookEndpoints({ WEBHOOKS: undefined, WEBHOOKS_FILE: '/x.json' }, () => JSON.stringify([endpoint()]))).toHaveLength(1);
    expect(() => webhookEndpoints({ WEBHOOKS: undefined, WEBHOOKS_FILE: '/missing.json' }, () => { throw Object.assign(new Error('no'), { code: 'ENOENT' }); })).toThrow(/WEBHOOKS_FILE: cannot read \/missing.json \(ENOENT\)/);
    expect(webhookEndpoints({ WEBHOOKS: undefined, WEBHOOKS_FILE: undefined })).toEqual([]);
    expect(() => loadConfig({ WEBHOOKS: '[]', WEBHOOKS_FILE: '/x' })).toThrow(/WEBHOOKS_FILE: set only one/);
  });

  it('WEBHOOK_RETRY_SCHEDULE: durations, about a day by default', () => {
    const schedule = loadConfig({}).WEBHOOK_RETRY_SCHEDULE;
    expect(schedule).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    expect(schedule.reduce((a, b) => a + b, 0) / 3_600_000).toBeCloseTo(27.6, 1);
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '250ms, 1s,2m' }).WEBHOOK_RETRY_SCHEDULE).toEqual([250, 1000, 120_000]);
    expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: '5 seconds' })).toThrow(/WEBHOOK_RETRY_SCHEDULE: "5 seconds" is not a duration/);
    expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE: '5000' })).toThrow(/WEBHOOK_RETRY_SCHEDULE: "5000" is not a duration/);
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: '' }).WEBHOOK_RETRY_SCHEDULE).toEqual([]);
  });

  it('docs/webhooks.md "Retries": one row per attempt, each delay the schedule\'s own entry in order, the times its running sums', () => {
    const page = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
    const section = page.slice(page.indexOf('## Retries'), page.indexOf('## Dead letters'));
    const rows = [...section.matchAll(/^\| (\d+) \| (.+?) \| (.+?) \|$/gm)].map((m) => ({ attempt: Number(m[1]), wait: m[2]!, since: m[3]! }));
    const written = /The default, `([^`]+)`/.exec(section)?.[1];
    // The default as the schema writes it (what docs/configuration.md shows).
    expect(`\`${written}\``).toBe(configurationRows().find((r) => r.name === 'WEBHOOK_RETRY_SCHEDULE')!.shownDefault);
    const schedule = loadConfig({ WEBHOOK_RETRY_SCHEDULE: written }).WEBHOOK_RETRY_SCHEDULE;
    expect(schedule).toEqual(loadConfig({}).WEBHOOK_RETRY_SCHEDULE);
    // Attempt 1 waits for nothing; attempt n + 1 waits the n-th delay.
    expect(rows.map((r) => r.attempt)).toEqual(Array.from({ length: schedule.length + 1 }, (_, i) => i + 1));
    expect(rows[0]!.wait).toMatch(/^— /);
    const entries = rows.slice(1).map((r) => /^`([^`]+)` \(the \d+(st|nd|rd|th) delay\)$/.exec(r.wait)?.[1]);
    expect(entries).toEqual(written!.split(','));
    const ordinals = rows.slice(1).map((r) => Number(/\(the (\d+)/.exec(r.wait)?.[1]));
    expect(ordinals).toEqual(schedule.map((_, i) => i + 1));
    let sum = 0;
    const sums = [0, ...schedule.map((d) => (sum += d))];
    expect(rows.map((r) => r.since)).toEqual(sums.map(spelled));
  });
});

describe('http:// only on a private network (docs/webhooks.md "Private networks")', () => {
  const accepted = [
    'http://127.0.0.1:3000/hooks',
    'http://127.8.9.10/hooks',
    'http://10.1.2.3/hooks',
    'http://172.16.0.1/hooks',
    'http://172.31.255.254/hooks',
    'http://192.168.1.20:8080/hooks',
    'http://169.254.10.1/hooks',
    'http://[::1]:3000/hooks',
    'http://[fd12:3456::1]/hooks',
    'http://[fe80::1]/hooks',
    'http://[::ffff:10.0.0.1]/hooks',
    'http://localhost:3000/hooks',
    'http://LOCALHOST./hooks',
    'http://hooks.localhost/hooks',
    'http://backend:3000/hooks',
    'http://billing.internal/hooks',
    'http://nas.home.arpa/hooks',
    'http://billing.calls.svc.cluster.local/hooks',
    'https://203.0.113.7/hooks',
    'https://backend.example.com/hooks',
  ];
  const refused = [
    ['http://203.0.113.7/hooks', '203.0.113.7'],
    ['http://8.8.8.8/hooks', '8.8.8.8'],
    ['http://172.32.0.1/hooks', '172.32.0.1'],
    ['http://192.169.0.1/hooks', '192.169.0.1'],
    ['http://100.64.0.1/hooks', '100.64.0.1'],
    ['http://0.0.0.0/hooks', '0.0.0.0'],
    ['http://[2001:db8::1]:8080/hooks', '[2001:db8::1]:8080'],
    ['http://[::ffff:8.8.8.8]/hooks', '[::ffff:808:808]'],
    ['http://backend.example.com/hooks', 'backend.example.com'],
    ['http://user:secret@hooks.example.com:8443/x?token=t', 'hooks.example.com:8443'],
    ['http://localhost.example.com/hooks', 'localhost.example.com'],
  ] as const;

  it('the page lists exactly the address ranges the check uses', () => {
    const page = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
    const section = page.slice(page.indexOf('### Private networks'), page.indexOf('## Events'));
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| counts as private')));
    const listed = [...table.matchAll(/`([0-9a-f:.]+)\/(\d+)`/g)].map((m) => `${m[1]}/${m[2]}`);
    expect(listed.sort()).toEqual(PRIVATE_RANGES.map(([network, prefix]) => `${network}/${prefix}`).sort());
  });

  it.each(accepted)('accepts %s', (url) => {
    expect(parseWebhookEndpoints(JSON.stringify([endpoint({ url })]))[0]!.url).toBe(url);
  });

  it.each(refused)('refuses %s, naming %s and nothing else of the URL', (url, host) => {
    let message = '';
    try {
      parseWebhookEndpoints(JSON.stringify([endpoint({ url })]));
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(`WEBHOOKS: endpoint "billing" url: http:// to ${host}, which is not on a private network`);
    expect(message).not.toMatch(/secret|token=/);
  });
});

describe('a delivery', () => {
  it('the webhook-id is stable per event and endpoint, and differs across both', () => {
    const e = { key: 'call-1.3' };
    expect(webhookId('billing', e)).toBe(webhookId('billing', { key: 'call-1.3' }));
    expect(webhookId('billing', e)).not.toBe(webhookId('chat', e));
    expect(webhookId('billing', e)).not.toBe(webhookId('billing', { key: 'call-1.4' }));
  });

  it('a body signed with the library verifies with svix, and a changed one does not', () => {
    const body = webhookBody({ type: 'push.token_removed', key: 'k', atMs: 1_795_236_718_009, data: { userId: 'u', installationId: 'i', kind: 'iosVoip', appId: 'a', tokenSuffix: 'abcdef', reason: 'Unregistered', removedAtMs: 1_795_236_718_009 } });
    expect(JSON.parse(body)).toMatchObject({ type: 'push.token_removed', timestamp: '2026-11-21T04:51:58.009Z' });
    const now = new Date();
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': new Signer(secret).sign('msg_1', now, body) };
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(secret).verify(body.replace('abcdef', 'abcdeg'), headers)).toThrow();
  });

  it("the server's signature is the standardwebhooks package's, and svix verifies it", () => {
    for (const s of [secret, newSecret(), newSecret()]) {
      const now = new Date();
      const seconds = Math.floor(now.getTime() / 1000);
      const body = JSON.stringify({ type: 'call.ended', timestamp: now.toISOString(), data: { callId: `c-${s.slice(-6)}`, note: 'ünïcode ✓' } });
      const signature = webhookSigner(s)('msg_2', seconds, body);
      expect(signature).toBe(new Signer(s).sign('msg_2', now, body));
      expect(new Webhook(s).verify(body, { 'webhook-id': 'msg_2', 'webhook-timestamp': String(seconds), 'webhook-signature': signature })).toEqual(JSON.parse(body));
    }
  });

  it('retry-after: seconds or an HTTP date; anything else counts as none', () => {
    expect(retryAfterMs('7')).toBe(7000);
    expect(retryAfterMs(new Date(1_000_000 + 30_000).toUTCString(), 1_000_000)).toBe(30_000);
    expect(retryAfterMs('soon')).toBe(0);
    expect(retryAfterMs(null)).toBe(0);
  });
});

/** A duration as docs/webhooks.md "Retries" spells it: `27 h 35 min 5 s`, `0` for none. */
function spelled(ms: number): string {
  const parts = [
    [Math.floor(ms / 3_600_000), 'h'],
    [Math.floor(ms / 60_000) % 60, 'min'],
    [Math.floor(ms / 1000) % 60, 's'],
    [ms % 1000, 'ms'],
  ] as const;
  return parts.filter(([n]) => n > 0).map(([n, unit]) => `${n} ${unit}`).join(' ') || '0';
}
