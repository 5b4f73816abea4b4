import type { Config } from '../config/config.js';
import type { CallRecord } from '../calls/model.js';
import type { Metrics } from '../observability/metrics.js';
import { JanusSfu } from './janus.js';
import { LiveKitSfu } from './livekit.js';
import type { Sfu, SfuObserver } from './sfu.js';

/**
 * The SFU the configuration names (`SFU`), when its settings are given (config.ts checks they are
 * with MEDIA_MODE=sfu); undefined otherwise. Group calls use it whatever MEDIA_MODE says.
 */
export function createSfu(config: Config, metrics: Metrics): Sfu | undefined {
  const observe: SfuObserver = {
    room: (op) => metrics.sfuRooms.inc({ sfu: config.SFU, op }),
    join: () => metrics.sfuJoins.inc({ sfu: config.SFU }),
    kick: () => metrics.sfuKicks.inc({ sfu: config.SFU }),
    error: (op) => metrics.sfuErrors.inc({ sfu: config.SFU, op }),
  };
  if (config.SFU === 'janus' && config.JANUS_URLS.length > 0 && config.JANUS_API_SECRET && config.JANUS_TOKEN_SECRET && config.JANUS_ADMIN_KEY) {
    const clientUrls = janusClientUrls(config);
    return new JanusSfu(
      {
        instances: config.JANUS_URLS.map((url, i) => ({ url, clientUrl: clientUrls[i]! })),
        apiSecret: config.JANUS_API_SECRET,
        tokenSecret: config.JANUS_TOKEN_SECRET,
        adminKey: config.JANUS_ADMIN_KEY,
        maxPublishers: config.SFU_ROOM_PUBLISHERS,
        timeoutMs: config.JANUS_TIMEOUT_MS,
      },
      observe,
    );
  }
  if (config.SFU === 'livekit' && config.LIVEKIT_URL && config.LIVEKIT_API_KEY && config.LIVEKIT_API_SECRET) {
    return new LiveKitSfu({ url: config.LIVEKIT_URL, apiKey: config.LIVEKIT_API_KEY, apiSecret: config.LIVEKIT_API_SECRET }, observe);
  }
  return undefined;
}

/** The URLs clients reach the Janus instances at, in JANUS_URLS order. */
export function janusClientUrls(config: Config): readonly string[] {
  return config.JANUS_CLIENT_URLS.length > 0 ? config.JANUS_CLIENT_URLS : config.JANUS_URLS;
}

/** What a call's media goes through (docs/api.md "Media session"): one-to-one calls as MEDIA_MODE says. */
export interface CallMedia {
  mode: Config['MEDIA_MODE'];
  /** The configured SFU, if any. */
  sfu: Sfu | undefined;
}

/**
 * The SFU a call's media goes through, or undefined for TURN only: a group call always goes
 * through the configured SFU (none configured: TURN only, docs/group-calls.md "Media"), a
 * one-to-one call only with MEDIA_MODE=sfu.
 */
export function sfuOf(media: CallMedia, call: Pick<CallRecord, 'kind'>): Sfu | undefined {
  return call.kind === 'group' || media.mode === 'sfu' ? media.sfu : undefined;
}
