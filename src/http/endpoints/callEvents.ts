import { z } from 'zod';
import type { Route } from '../router.js';
import { authenticate } from '../request.js';
import { errors } from '../../commands/errors.js';
import type { AuthGuard } from '../../auth/guard.js';
import type { EventLog } from '../../events/eventLog.js';
import { decodeCursor } from '../../events/cursor.js';

const limitSchema = z.coerce.number().int().min(1).max(500);

/**
 * GET /v1/call-events?cursor=&limit=: the events for this installation after the cursor, the next
 * cursor, and `hasMore`. `limit` counts entries of the user's log read, not events returned: entries
 * meant for the user's other installations are read and skipped, so a page may hold fewer events
 * than `limit`, even none, while `hasMore` is true (docs/protocol.md "Catching up over HTTP"). Without a
 * cursor: no history, `nextCursor` at the head. A cursor older than the log's retention, or from
 * before a reset, gets an explicit gap.
 */
export function callEventsRoute(deps: { auth: AuthGuard; eventLog: EventLog }): Route {
  return {
    method: 'get',
    pattern: '/v1/call-events',
    handler: async (ctx) => {
      const me = await authenticate(ctx, deps.auth);
      const q = new URLSearchParams(ctx.query);
      const rawCursor = q.get('cursor');
      const cursor = rawCursor ? decodeCursor(rawCursor) : undefined;
      if (rawCursor && !cursor) throw errors.badCursor();
      const rawLimit = q.get('limit');
      const limit = rawLimit === null ? 100 : limitSchema.safeParse(rawLimit);
      if (typeof limit !== 'number' && !limit.success) throw errors.invalidRequest('limit: must be an integer from 1 to 500');
      const result = await deps.eventLog.read(me.userId, me.installationId, cursor, typeof limit === 'number' ? limit : limit.data);
      if (result.kind === 'gap') {
        // The gap's cursor is the log's head: nothing follows it yet.
        return { status: 200, body: `{"gap":{"reason":"${result.reason}"},"events":[],"nextCursor":"${result.nextCursor}","hasMore":false}` };
      }
      // Stored payloads are already JSON text: splice them in instead of re-serialising.
      return {
        status: 200,
        body: `{"events":[${result.events.map((e) => e.json).join(',')}],"nextCursor":"${result.nextCursor}","hasMore":${result.more}}`,
      };
    },
  };
}
