/**
 * Live signals' notice on a single Redis (docs/signaling.md "Live signals"): lua/sendSignals.lua
 * publishes the signals a gateway received in one turn together, on an early channel, which
 * every gateway subscribes to, with all their recipients, instead of once per recipient's own
 * channel:
 *
 *   `!signalbatch\n<recipients>\n<signal JSON>\n<recipients>\n<signal JSON>…`
 *
 * where `<recipients>` is `<userId>\t<installationId>\t<userId>\t<installationId>…` (a userId or
 * installationId holds no control character: src/commands/schemas.ts principalId; a signal's
 * JSON holds no line break). A single signal goes as `!signals\n<recipients>\n<signal JSON>`,
 * the form the previous version published and reads; it ignores a batch (an early message of an
 * epoch it does not know), so while versions are mixed its sockets miss some signals, which are
 * at most once, and never get a misread one. Each gateway hands each signal
 * to the recipients' installations it holds. On a Redis Cluster there are no early channels:
 * the gateway publishes to each recipient's channel (src/gateway/signals.ts).
 */
const SIGNAL_NOTICE = '!signals\n';
const SIGNAL_BATCH_NOTICE = '!signalbatch\n';

/** Published on a user's live channel in place of a log epoch (src/events/eventLog.ts parseLiveMessage). */
export const SIGNAL_EPOCH = '!signal';

/** A signal on a user's live channel, for one installation (a cluster: src/gateway/signals.ts). */
export function signalMessage(installationId: string, signalJson: string): string {
  return `${SIGNAL_EPOCH}\n\n\n${installationId}\n\n${signalJson}`;
}

export interface SignalNotice {
  /** `userId\tinstallationId\tuserId\tinstallationId…`, as published. */
  recipients: string;
  json: string;
}

/** The length of the notice's prefix, or 0 when `message` is not a signal notice (of either form). */
export function signalNoticePrefix(message: string): number {
  return message.startsWith(SIGNAL_NOTICE) ? SIGNAL_NOTICE.length : message.startsWith(SIGNAL_BATCH_NOTICE) ? SIGNAL_BATCH_NOTICE.length : 0;
}

/** The signals of a notice, in order: [] when `message` is none. */
export function parseSignalNotice(message: string): SignalNotice[] {
  const start = signalNoticePrefix(message);
  const out: SignalNotice[] = [];
  if (start === 0) return out;
  let at = start;
  while (at < message.length) {
    const split = message.indexOf('\n', at);
    if (split < 0) break;
    const next = message.indexOf('\n', split + 1);
    const end = next < 0 ? message.length : next;
    out.push({ recipients: message.slice(at, split), json: message.slice(split + 1, end) });
    at = end + 1;
  }
  return out;
}
