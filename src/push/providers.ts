import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.js';
import { ConfigError } from '../config/config.js';
import type { Logger } from '../util/logger.js';
import type { PushSenders } from './dispatcher.js';
import { Http2Pool } from './http2Pool.js';
import { ApnsSender } from './apns.js';
import { FcmSender } from './fcm.js';
import { parseServiceAccount } from './fcmAccessToken.js';

const IOS_VARS = ['IOS_PUSH_KEY_FILE', 'IOS_PUSH_KEY_ID', 'IOS_PUSH_TEAM_ID', 'IOS_BUNDLE_ID'] as const;
const ANDROID_VARS = ['ANDROID_PROJECT_ID', 'ANDROID_SERVICE_ACCOUNT_FILE'] as const;

/** Names the variables of a group that are missing when some but not all are set. */
function missingOf(config: Config, vars: readonly (keyof Config)[]): { any: boolean; missing: string[] } {
  const missing = vars.filter((v) => !config[v]);
  return { any: missing.length < vars.length, missing };
}

function readVarFile(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`invalid configuration:\n  ${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/**
 * Builds the push senders that are configured. A half-configured platform stops the process
 * with the missing variables named; an unconfigured one is reported at start and its devices
 * are rung over signaling only.
 */
export function createPushSenders(config: Config, logger: Logger): PushSenders {
  const pool = new Http2Pool();
  const senders: PushSenders = { close: () => pool.close() };

  const ios = missingOf(config, IOS_VARS);
  if (ios.any && ios.missing.length) {
    throw new ConfigError(`invalid configuration:\n${ios.missing.map((v) => `  ${v}: required when iOS push is configured`).join('\n')}`);
  }
  if (ios.any) {
    if (!config.IOS_PUSH_URL && !config.IOS_PUSH_SANDBOX_URL) {
      throw new ConfigError('invalid configuration:\n  IOS_PUSH_URL: set IOS_PUSH_URL and/or IOS_PUSH_SANDBOX_URL');
    }
    senders.apns = new ApnsSender({
      ...(config.IOS_PUSH_URL ? { productionUrl: config.IOS_PUSH_URL } : {}),
      ...(config.IOS_PUSH_SANDBOX_URL ? { sandboxUrl: config.IOS_PUSH_SANDBOX_URL } : {}),
      keyPem: readVarFile('IOS_PUSH_KEY_FILE', config.IOS_PUSH_KEY_FILE!),
      keyId: config.IOS_PUSH_KEY_ID!,
      teamId: config.IOS_PUSH_TEAM_ID!,
      bundleId: config.IOS_BUNDLE_ID!,
      pool,
    });
  } else {
    logger.warn('iOS push is not configured (IOS_PUSH_*): iOS devices are rung over signaling only');
  }

  const android = missingOf(config, ANDROID_VARS);
  if (android.any && android.missing.length) {
    throw new ConfigError(`invalid configuration:\n${android.missing.map((v) => `  ${v}: required when Android push is configured`).join('\n')}`);
  }
  if (android.any) {
    let serviceAccount;
    try {
      serviceAccount = parseServiceAccount(readVarFile('ANDROID_SERVICE_ACCOUNT_FILE', config.ANDROID_SERVICE_ACCOUNT_FILE!));
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError(`invalid configuration:\n  ANDROID_SERVICE_ACCOUNT_FILE: ${(err as Error).message}`);
    }
    senders.fcm = new FcmSender({
      ...(config.ANDROID_PUSH_URL ? { url: config.ANDROID_PUSH_URL } : {}),
      projectId: config.ANDROID_PROJECT_ID!,
      serviceAccount,
      pool,
    });
  } else {
    logger.warn('Android push is not configured (ANDROID_*): Android devices are rung over signaling only');
  }
  return senders;
}
