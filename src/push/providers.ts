import type { Config } from '../config/config.js';
import type { Logger } from '../util/logger.js';
import type { PushSenders } from './pushWorker.js';

/** Builds the push senders that are configured; says at start which ones are not. */
export async function createPushSenders(config: Config, logger: Logger): Promise<PushSenders> {
  void config;
  logger.warn('push is not configured: invitations go out over signaling only');
  return {};
}
