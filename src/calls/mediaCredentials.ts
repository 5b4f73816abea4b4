import { createHmac } from 'node:crypto';

export interface IceServer {
  urls: string[];
  username?: string;
  credential?: string;
}

export interface MediaCredentials {
  iceServers: IceServer[];
  expiresAtMs: number;
}

/**
 * Short-lived TURN credentials in the TURN REST API scheme that coturn's `use-auth-secret`
 * checks: username `<expiry unix seconds>:<userId>`, credential base64(HMAC-SHA1(secret, username)).
 * STUN URLs need no credentials and are listed apart.
 */
export function mediaCredentials(opts: {
  userId: string;
  nowMs: number;
  ttlSeconds: number;
  urls: readonly string[];
  secret: string | undefined;
}): MediaCredentials {
  const expiry = Math.floor(opts.nowMs / 1000) + opts.ttlSeconds;
  const stun = opts.urls.filter((u) => /^stuns?:/.test(u));
  const turn = opts.urls.filter((u) => /^turns?:/.test(u));
  const iceServers: IceServer[] = [];
  if (stun.length) iceServers.push({ urls: stun });
  if (turn.length && opts.secret) {
    const username = `${expiry}:${opts.userId}`;
    const credential = createHmac('sha1', opts.secret).update(username).digest('base64');
    iceServers.push({ urls: turn, username, credential });
  }
  return { iceServers, expiresAtMs: expiry * 1000 };
}
