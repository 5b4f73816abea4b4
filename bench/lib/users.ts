import { mintToken } from '../../src/auth/devTokens.js';

/**
 * Bench identities. Each device is its own installation with its own session token, minted with
 * the project's dev helper (HS256 with the secret the server was started with).
 */
export interface Device {
  userId: string;
  installationId: string;
  token: string;
}

export function device(secret: string, userId: string, installationId: string, name?: string): Device {
  return { userId, installationId, token: mintToken(secret, { sub: userId, iid: installationId, ...(name ? { name } : {}), ttlSeconds: 6 * 3600 }) };
}

/** A short random tag that keeps one run's users apart from another's on a shared Redis. */
export function runTag(): string {
  return Math.random().toString(36).slice(2, 8);
}
