import type { Redis, Cluster } from 'ioredis';
import type { PairCall } from '../../src/calls/model.js';
import type { PushRegistration } from '../../src/push/registry.js';

/** Who the tests' call is between: Alice (alice-phone) calls Bob, audio. */
export const ALICE_CALLS_BOB = {
  callerUserId: 'alice',
  callerInstallationId: 'alice-phone',
  callerDisplayName: 'Alice',
  callerHandle: 'app:alice',
  calleeUserId: 'bob',
  video: false,
} as const satisfies Partial<PairCall>;

/**
 * The unit tests' call: ringing, from Alice (alice-phone) to Bob, audio. Each test overrides what
 * it is about (IDs, times, state), so the rest of the record is spelled once.
 */
export function ringingCall(over: Partial<Omit<PairCall, 'kind'>> = {}): PairCall {
  return {
    kind: 'pair',
    callId: 'call-1',
    state: 'ringing',
    revision: '1',
    ...ALICE_CALLS_BOB,
    createdAtMs: 1_700_000_000_000,
    expiresAtMs: 1_700_000_045_000,
    ...over,
  };
}

/** A push registration of `installationId` (an Android one unless `kind` says otherwise). */
export const registration = (userId: string, installationId: string, kind: PushRegistration['kind'] = 'androidPush'): PushRegistration => ({
  userId,
  installationId,
  kind,
  token: `${installationId}-token`,
  appId: 'com.example',
  updatedAtMs: 1,
  ...(kind === 'iosVoip' ? { iosEnvironment: 'production' as const } : {}),
});

/**
 * A call's stored fields, as strings, read straight from its key (lua/includes/callRead.lua: the
 * JSON list of its fields and values): {} when the call is gone. For tests that check what a script
 * wrote, field by field.
 */
export async function storedCallFields(redis: Pick<Redis | Cluster, 'get'>, key: string): Promise<Record<string, string>> {
  const flat = JSON.parse((await redis.get(key)) ?? '[]') as string[];
  const fields: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return fields;
}
