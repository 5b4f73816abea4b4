import { createHmac } from 'node:crypto';

/** The Janus plugin a media credential opens (docs/operations.md "SFU media"). */
export const VIDEOROOM = 'janus.plugin.videoroom';

/**
 * A Janus signed token (Janus's `token_auth` with `token_auth_secret`): `<expiry unix seconds>,
 * janus,<plugin>[,<more>]:<signature>`, the signature being base64 HMAC-SHA1 of everything before
 * the colon, as Janus 1.1 checks it. Janus refuses it once expired and opens only the plugins it
 * lists. `tag` makes each participant's token its own (Janus ignores entries that name no plugin);
 * the room's `allowed` list then admits exactly these tokens (src/media/janus.ts).
 */
export function janusToken(secret: string, expirySeconds: number, tag: string): string {
  const data = `${expirySeconds},janus,${VIDEOROOM},${tag}`;
  return `${data}:${createHmac('sha1', secret).update(data).digest('base64')}`;
}
