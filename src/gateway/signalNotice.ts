/**
 * A live signal's notice on a single Redis (docs/signaling.md "Live signals"): lua/sendSignal.lua
 * publishes each signal once, on its call shard's early channel, which every gateway subscribes
 * to, with all its recipients, instead of once per recipient's own channel:
 *
 *   `!signals\n<userId>\t<installationId>\t<userId>\t<installationId>…\n<signal JSON>`
 *
 * (a userId or installationId holds no control character: src/commands/schemas.ts principalId). Each gateway
 * hands the signal to the recipients' installations it holds. On a Redis Cluster there are no
 * early channels: the gateway publishes to each recipient's channel (src/gateway/signals.ts).
 */
export const SIGNAL_NOTICE = '!signals\n';

/** Published on a user's live channel in place of a log epoch (src/events/eventLog.ts parseLiveMessage). */
export const SIGNAL_EPOCH = '!signal';

/** A signal on a user's live channel, for one installation (a cluster: src/gateway/signals.ts). */
export function signalMessage(installationId: string, signalJson: string): string {
  return `${SIGNAL_EPOCH}\n\n\n${installationId}\n\n${signalJson}`;
}

export interface SignalNotice {
  /** userId, installationId, userId, installationId, … */
  recipients: string[];
  json: string;
}

export function parseSignalNotice(message: string): SignalNotice | undefined {
  const end = message.indexOf('\n', SIGNAL_NOTICE.length);
  if (end < 0) return undefined;
  return { recipients: message.slice(SIGNAL_NOTICE.length, end).split('\t'), json: message.slice(end + 1) };
}
