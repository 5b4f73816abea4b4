import { describe, expect, it } from 'vitest';
import { TokenVerifier } from 'livekit-server-sdk';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { createSfu, sfuOf } from '../../src/media/callMedia.js';
import { placeRoom } from '../../src/media/placement.js';
import { liveKitIdentity } from '../../src/media/livekit.js';
import { Metrics } from '../../src/observability/metrics.js';
import { waitUntil } from '../support/wait.js';

/**
 * SFU media's configuration, room placement and LiveKit tokens (docs/operations.md "SFU media").
 * The LiveKit tokens are checked with livekit-server-sdk's own TokenVerifier, as a LiveKit server
 * checks them.
 */

const base = { AUTH_JWT_SECRET: 'x'.repeat(32) };
const janus = {
  ...base,
  MEDIA_MODE: 'sfu',
  JANUS_URLS: 'http://10.0.0.5:8088/janus,http://10.0.0.6:8088/janus',
  JANUS_CLIENT_URLS: 'wss://j1.example.org/,wss://j2.example.org/',
  JANUS_API_SECRET: 'api',
  JANUS_TOKEN_SECRET: 'token',
  JANUS_ADMIN_KEY: 'admin',
};
const livekit = { ...base, MEDIA_MODE: 'sfu', SFU: 'livekit', LIVEKIT_URL: 'wss://lk.example.org', LIVEKIT_API_KEY: 'APIkey1', LIVEKIT_API_SECRET: 's'.repeat(40) };

const pair = { kind: 'pair' } as const;

describe('media configuration', () => {
  it('p2p by default: no SFU for one-to-one calls', () => {
    const c = loadConfig(base);
    expect(c.MEDIA_MODE).toBe('p2p');
    expect(sfuOf({ mode: c.MEDIA_MODE, sfu: createSfu(c, new Metrics()) }, pair)).toBeUndefined();
  });

  it('group calls go through the configured SFU whatever MEDIA_MODE says, and get TURN only when none is configured', () => {
    const group = { kind: 'group' } as const;
    const p2pWithJanus = loadConfig({ ...janus, MEDIA_MODE: 'p2p' });
    const media = { mode: p2pWithJanus.MEDIA_MODE, sfu: createSfu(p2pWithJanus, new Metrics()) };
    expect(sfuOf(media, group)?.kind).toBe('janus');
    expect(sfuOf(media, pair)).toBeUndefined();
    const sfuMode = loadConfig(janus);
    expect(sfuOf({ mode: sfuMode.MEDIA_MODE, sfu: createSfu(sfuMode, new Metrics()) }, pair)?.kind).toBe('janus');
    expect(sfuOf({ mode: 'p2p', sfu: createSfu(loadConfig(base), new Metrics()) }, group)).toBeUndefined();
  });

  it('with MEDIA_MODE=p2p, some SFU settings without the others are a start error, not TURN only for group calls', () => {
    expect(() => loadConfig({ ...janus, MEDIA_MODE: 'p2p', JANUS_ADMIN_KEY: '' })).toThrow(/JANUS_ADMIN_KEY: required with SFU=janus once any of JANUS_URLS, JANUS_API_SECRET, JANUS_TOKEN_SECRET, JANUS_ADMIN_KEY is given/);
    expect(() => loadConfig({ ...base, SFU: 'livekit', LIVEKIT_URL: 'wss://lk.example.org' })).toThrow(/LIVEKIT_API_KEY: required with SFU=livekit once any of/);
    expect(createSfu(loadConfig({ ...base, SFU: 'livekit' }), new Metrics())).toBeUndefined();
  });

  it('sfu with Janus needs its URLs and three secrets, and one client URL per instance', () => {
    expect(createSfu(loadConfig(janus), new Metrics())?.kind).toBe('janus');
    for (const missing of ['JANUS_URLS', 'JANUS_API_SECRET', 'JANUS_TOKEN_SECRET', 'JANUS_ADMIN_KEY']) {
      expect(() => loadConfig({ ...janus, [missing]: '' }), missing).toThrow(new RegExp(`${missing}: required with MEDIA_MODE=sfu`));
    }
    expect(() => loadConfig({ ...janus, JANUS_CLIENT_URLS: 'wss://j1.example.org/' })).toThrow(/JANUS_CLIENT_URLS: needs one URL per JANUS_URLS entry/);
    expect(() => loadConfig({ ...janus, JANUS_URLS: 'ftp://x/janus' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, MEDIA_MODE: 'mesh' })).toThrow(ConfigError);
  });

  it('sfu with LiveKit needs its URL, key and secret', () => {
    expect(createSfu(loadConfig(livekit), new Metrics())?.kind).toBe('livekit');
    for (const missing of ['LIVEKIT_URL', 'LIVEKIT_API_KEY', 'LIVEKIT_API_SECRET']) {
      expect(() => loadConfig({ ...livekit, [missing]: '' }), missing).toThrow(new RegExp(`${missing}: required with MEDIA_MODE=sfu and SFU=livekit`));
    }
  });
});

describe('room placement (rendezvous hashing)', () => {
  const three = ['http://a/janus', 'http://b/janus', 'http://c/janus'].map((url) => ({ url }));
  const callIds = Array.from({ length: 3000 }, (_, i) => `call-${i}`);

  it('places every call on one instance, the same every time, spread over all of them', () => {
    const counts = new Map<string, number>();
    for (const id of callIds) {
      const at = placeRoom(id, three).url;
      expect(placeRoom(id, [...three].reverse()).url).toBe(at);
      counts.set(at, (counts.get(at) ?? 0) + 1);
    }
    for (const i of three) expect(counts.get(i.url)).toBeGreaterThan(800);
  });

  it('adding an instance moves only calls to it; removing one moves only its own', () => {
    const four = [...three, { url: 'http://d/janus' }];
    for (const id of callIds) {
      const before = placeRoom(id, three).url;
      const after = placeRoom(id, four).url;
      if (after !== before) expect(after).toBe('http://d/janus');
      const withoutB = placeRoom(id, three.filter((i) => i.url !== 'http://b/janus')).url;
      if (before !== 'http://b/janus') expect(withoutB).toBe(before);
    }
  });
});

describe('LiveKit access tokens', () => {
  const config = loadConfig(livekit);
  const participant = { callId: 'call-42', userId: 'alice', installationId: 'alice-phone' };

  it('name the callId as the only room, the user and installation as identity, and expire with the media session', async () => {
    const sfu = createSfu(config, new Metrics())!;
    const expiresAtMs = Date.now() + 600_000;
    const access = await sfu.admit(participant, expiresAtMs);
    expect(access).toMatchObject({ kind: 'livekit', url: 'wss://lk.example.org', room: 'call-42' });
    const claims = await new TokenVerifier(livekit.LIVEKIT_API_KEY, livekit.LIVEKIT_API_SECRET).verify(access.token);
    expect(claims.sub).toBe(liveKitIdentity(participant));
    expect(claims.iss).toBe(livekit.LIVEKIT_API_KEY);
    expect(claims.video).toEqual({ room: 'call-42', roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true });
    expect(claims.exp! * 1000).toBeLessThanOrEqual(expiresAtMs);
    expect(claims.exp! * 1000).toBeGreaterThanOrEqual(Math.floor(expiresAtMs / 1000) * 1000 - 1000);
    // Another deployment's secret does not verify it.
    await expect(new TokenVerifier(livekit.LIVEKIT_API_KEY, 'another-secret-'.repeat(3)).verify(access.token)).rejects.toThrow();
  });

  it('is refused by the verifier once expired (no clock tolerance)', async () => {
    const sfu = createSfu(config, new Metrics())!;
    const access = await sfu.admit(participant, Date.now() + 1000);
    const verifier = new TokenVerifier(livekit.LIVEKIT_API_KEY, livekit.LIVEKIT_API_SECRET);
    await waitUntil('the one-second token to expire', () => verifier.verify(access.token, 0).then(() => false, (err: Error) => /exp/.test(err.message)), 5000, { intervalMs: 100 });
  });
});
