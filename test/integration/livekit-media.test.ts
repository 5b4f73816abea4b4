import { TokenVerifier } from 'livekit-server-sdk';
import { describe, expect, it } from 'vitest';
import { stackForFile } from '../support/stack.js';
import { acceptedCall, device, expectJson, expectProblem, type Device } from '../support/fixtures.js';

/**
 * MEDIA_MODE=sfu with SFU=livekit through a real server (docs/api.md "Media session"): each
 * participant of an accepted call gets a LiveKit access token for the room named by the callId,
 * under its own identity, that livekit-server-sdk's TokenVerifier accepts with the deployment's
 * key; nobody else gets one.
 */

const LIVEKIT = { LIVEKIT_URL: 'wss://livekit.example.org', LIVEKIT_API_KEY: 'APItestkey', LIVEKIT_API_SECRET: 'livekit-test-secret-'.repeat(2) };
let url: string;
stackForFile({ ROLES: 'api', MEDIA_MODE: 'sfu', SFU: 'livekit', ...LIVEKIT }, (s) => (url = s.url));

const mediaSession = (d: Device, callId: string) => d.api.post(`/v1/calls/${callId}/media-session`, {});

describe('LiveKit media sessions', () => {
  it('both participants get a token for the callId room under their own identity; a stranger gets none', async () => {
    const { callId, caller, callee } = await acceptedCall(url);
    const verifier = new TokenVerifier(LIVEKIT.LIVEKIT_API_KEY, LIVEKIT.LIVEKIT_API_SECRET);
    for (const d of [caller, callee]) {
      const res = await mediaSession(d, callId);
      expectJson(res, 200);
      expect(res.json.sfu).toMatchObject({ kind: 'livekit', url: LIVEKIT.LIVEKIT_URL, room: callId });
      const claims = await verifier.verify(res.json.sfu.token, 0);
      expect(claims.sub).toBe(`${d.userId}#${d.installationId}`);
      expect(claims.video).toMatchObject({ room: callId, roomJoin: true });
      // Whole seconds from the second the SDK signs in: at expiresAtMs, or one second before it.
      expect(res.json.expiresAtMs / 1000 - claims.exp!).toBeGreaterThanOrEqual(0);
      expect(res.json.expiresAtMs / 1000 - claims.exp!).toBeLessThanOrEqual(1);
    }
    expectProblem(await mediaSession(device(url), callId), 'not_found', 'call not found');
  });
});
