import { Bench } from 'tinybench';
import { jwtVerify } from 'jose';
import { Packr } from 'msgpackr';
import { createTokenVerifier } from '../../src/auth/verifier.js';
import { mintToken } from '../../src/auth/devTokens.js';
import { encodeEventFrame } from '../../src/gateway/protocol.js';
import { invitationPayload } from '../../src/events/payloads.js';
import { deliveriesFor } from '../../src/events/audience.js';
import { parseChange } from '../../src/calls/change.js';
import type { PairCall } from '../../src/calls/model.js';
import type { BenchContext } from '../lib/context.js';
import { fmtBytes, fmtNum, mdTable, type ScenarioResult } from '../lib/report.js';

/**
 * Microbenchmarks (tinybench) of the hot paths: session-token verification (fast-jwt behind the
 * server's cache of verified tokens, as the server runs it, vs jose), event frame encoding (JSON splice vs msgpackr) and
 * decoding, and building an invitation from an outbox entry.
 */
export async function microScenario(ctx: BenchContext): Promise<ScenarioResult> {
  const secret = ctx.secret.length >= 32 ? ctx.secret : ctx.secret.padEnd(32, 'x');
  const verify = createTokenVerifier({ secret });
  const token = mintToken(secret, { sub: 'alice', iid: 'alice-phone', name: 'Alice' });
  // Twice the verifier's cache size (10,000 tokens), so every verification misses the cache.
  const distinct = Array.from({ length: 20_000 }, (_, i) => mintToken(secret, { sub: `u${i}`, iid: `u${i}-phone` }));
  const key = new TextEncoder().encode(secret);
  const call: PairCall = {
    kind: 'pair',
    callId: '0b7c6f7e-2a53-4c1b-9d1e-6a0f0f6b2d11',
    state: 'ringing',
    revision: '1',
    callerUserId: 'alice',
    callerInstallationId: 'alice-phone',
    callerDisplayName: 'Alice Example',
    callerHandle: 'app:alice',
    calleeUserId: 'bob',
    video: false,
    createdAtMs: Date.now(),
    expiresAtMs: Date.now() + 45_000,
  };
  const flat = ['change', 'created', 'at', String(call.createdAtMs), ...Object.entries(call).flatMap(([k, v]) => [k, k === 'video' ? (v ? '1' : '0') : String(v)])];
  const payloadJson = JSON.stringify(invitationPayload(call, Date.now()));
  const cursor = '1a2b3c_1732170000000-0';
  const jsonFrame = encodeEventFrame('json', cursor, payloadJson) as string;
  const packFrame = encodeEventFrame('msgpack', cursor, payloadJson) as Uint8Array;
  const packr = new Packr({ useRecords: false, mapsAsObjects: true });

  let d = 0;
  const bench = new Bench({ time: ctx.opts.sizes.micro.timeMs, warmupTime: 100 });
  bench
    .add('token: fast-jwt + cache (same token; the server\'s verifier)', () => {
      verify(token);
    })
    .add('token: fast-jwt, cache misses (20k distinct tokens)', () => {
      verify(distinct[d++ % distinct.length]!);
    })
    .add('token: jose jwtVerify HS256', async () => {
      await jwtVerify(token, key, { algorithms: ['HS256'] });
    })
    .add('frame encode: JSON (stored payload spliced in)', () => {
      encodeEventFrame('json', cursor, payloadJson);
    })
    .add('frame encode: msgpackr (payload parsed, packed)', () => {
      encodeEventFrame('msgpack', cursor, payloadJson);
    })
    .add('frame decode: JSON.parse', () => {
      JSON.parse(jsonFrame);
    })
    .add('frame decode: msgpackr unpack', () => {
      packr.unpack(packFrame);
    })
    .add('invitation: payload object + JSON', () => {
      JSON.stringify(invitationPayload(call, 0));
    })
    .add('invitation: outbox entry → deliveries → JSON (relay path)', () => {
      for (const dl of deliveriesFor(parseChange('1-0', 0, flat))) JSON.stringify(dl.payload);
    });
  await bench.run();

  const stats = new Map<string, { hz: number; meanUs: number; p99Us: number; samples: number }>();
  for (const t of bench.tasks) {
    const r = t.result;
    if (r.state !== 'completed') continue;
    stats.set(t.name, { hz: r.throughput.mean, meanUs: r.latency.mean * 1000, p99Us: r.latency.p99 * 1000, samples: r.latency.samples?.length ?? 0 });
  }
  const hz = (prefix: string) => [...stats.entries()].find(([k]) => k.startsWith(prefix))?.[1].hz ?? NaN;
  const fast = hz('token: fast-jwt + cache');
  const miss = hz('token: fast-jwt, cache');
  const jose = hz('token: jose');
  const encJ = hz('frame encode: JSON');
  const encM = hz('frame encode: msgpackr');
  const decJ = hz('frame decode: JSON');
  const decM = hz('frame decode: msgpackr');
  const inv = hz('invitation: outbox');
  for (const [k, v] of stats) ctx.log(`  ${k}: ${fmtNum(v.hz)} ops/s (mean ${v.meanUs.toFixed(2)} µs)`);

  const md = [
    `tinybench, ${ctx.opts.sizes.micro.timeMs} ms per task, in the bench's main process (Node ${process.version}).`,
    '',
    mdTable(
      ['task', 'ops/s', 'mean', 'p99'],
      [...stats.entries()].map(([k, v]) => [k, fmtNum(v.hz), `${v.meanUs.toFixed(2)} µs`, `${v.p99Us.toFixed(2)} µs`]),
    ),
    '',
    `Frame sizes for one \`call.invited\` event: JSON ${fmtBytes(Buffer.byteLength(jsonFrame))}, msgpack ${fmtBytes(packFrame.byteLength)}.`,
    '',
    `The server's verifier (fast-jwt behind its cache of verified tokens) verifies ${(fast / jose).toFixed(1)}× as many tokens per second as jose (${(miss / jose).toFixed(1)}× on cache misses). ` +
      `On the server, msgpackr frame encoding runs at ${(encM / encJ).toFixed(2)}× the JSON frame's rate (the JSON frame splices the stored payload text in; msgpack must parse it first); ` +
      `on the client, msgpackr decoding runs at ${(decM / decJ).toFixed(2)}× JSON.parse's rate.`,
  ].join('\n');

  return {
    id: 'micro',
    title: 'Microbenchmarks (tinybench)',
    headlines: [
      { metric: 'token verify: fast-jwt cached vs jose (ops/s)', value: `${fmtNum(fast)} vs ${fmtNum(jose)}`, ceiling: 'jose (same run)', ratio: `${(fast / jose).toFixed(1)}×` },
      { metric: 'event frame encode: msgpackr vs JSON (ops/s)', value: `${fmtNum(encM)} vs ${fmtNum(encJ)}`, ceiling: 'JSON (same run)', ratio: `${(encM / encJ).toFixed(2)}×` },
      { metric: 'invitation from an outbox entry (ops/s)', value: fmtNum(inv), ceiling: 'payload alone (same run)', ratio: `${(inv / hz('invitation: payload')).toFixed(2)}×` },
    ],
    goals: [],
    markdown: md,
    data: Object.fromEntries(stats),
  };
}
