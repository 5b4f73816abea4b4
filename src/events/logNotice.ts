import type { LiveMessage } from './eventLog.js';

/**
 * Log notices (docs/signaling.md "Early events"). On a single Redis the relay does not publish
 * each new log entry on its user's live channel: appendEvents.lua gathers a batch's new entries
 * and publishes them once, on the call shard's early channel that every gateway follows, as a
 * live message with this epoch. Its body is, per entry, the user's live channel name and the
 * entry's live message as the user's channel would have carried it (epoch, previous ID, ID, only,
 * except, payload JSON), each on a line of its own: the names and IDs hold no newline, and the
 * payload is JSON on one line. A gateway reads each entry for the users it holds sockets of, as
 * if it had come on their channel; the previous-ID chain finds a hole the same way.
 */
export const LOG_NOTICE_EPOCH = '!log';

/** The lines one entry takes: the channel, then the live message's six parts. */
const LINES_PER_ENTRY = 7;

/** The entries of a log notice's body, each with the live channel it was for. */
export function* logNoticeEntries(body: string): Generator<{ channel: string; message: LiveMessage }> {
  const lines = body.split('\n');
  for (let i = 0; i + LINES_PER_ENTRY <= lines.length; i += LINES_PER_ENTRY) {
    const [channel, epoch, previousId, id, only, except, json] = lines.slice(i, i + LINES_PER_ENTRY) as [string, string, string, string, string, string, string];
    yield { channel, message: { epoch, previousId, id, only, except, json } };
  }
}
