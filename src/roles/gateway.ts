import type { Uws } from '../transport/uws.js';
import { connectRedis } from '../redis/connection.js';
import { Gateway } from '../gateway/gateway.js';
import { SignalSender } from '../gateway/signals.js';
import type { RoleContext, StartedRole } from './context.js';

/** The gateway role: the devices' signaling sockets (docs/signaling.md). */

/** The signaling gateway: WebSockets on the same app, fed by sharded Pub/Sub. */
export async function startGateway(ctx: RoleContext, app: ReturnType<Uws['App']>): Promise<StartedRole & { gateway: Gateway }> {
  const { config, metrics } = ctx;
  const subscriber = connectRedis(ctx.redisTarget, 'subscriber', 'calling-backend');
  await subscriber.connect();
  const gateway = new Gateway(subscriber, ctx.deps.eventLog, ctx.deps.auth, ctx.logger, {
    ...ctx.ks,
    messagesPer10s: config.RATE_WS_MESSAGES_PER_10S,
    maxSocketsPerUser: config.WS_MAX_SOCKETS_PER_USER,
    admissionsPerS: config.WS_ADMISSIONS_PER_S,
    clientIpHeader: config.CLIENT_IP_HEADER,
    allowedOrigins: config.WS_CHECK_ORIGIN ? config.CORS_ORIGINS : undefined,
    idleTimeoutS: config.WS_IDLE_TIMEOUT_S,
    maxMessageBytes: config.WS_MAX_MESSAGE_BYTES,
    maxBackpressureBytes: config.WS_MAX_BACKPRESSURE_BYTES,
    readBatch: 200,
  }, ctx.deps, new SignalSender(ctx.redis, ctx.ks, config.RATE_CALL_SIGNALS_PER_S), ctx.deps.missedCallSeen);
  gateway.mount(app);
  gateway.startSweeps();
  metrics.gaugesFrom('ws_open_sockets', 'Open signaling WebSockets by encoding (json, msgpack)', ['encoding'], () =>
    [...gateway.openSocketsByEncoding()].map(([encoding, n]) => [[encoding], n]),
  );
  metrics.countersFrom('ws_events_sent_total', 'Events sent over signaling', [], () => [[[], gateway.stats.eventsSent]]);
  metrics.countersFrom('ws_early_events_sent_total', 'Of the events sent over signaling, those sent early, ahead of the log', [], () => [[[], gateway.stats.earlyEventsSent]]);
  metrics.countersFrom('ws_messages_sent_total', 'In-call messages sent over signaling', [], () => [[[], gateway.stats.messagesSent]]);
  metrics.countersFrom('ws_signals_sent_total', 'Live signals sent over signaling', [], () => [[[], gateway.stats.signalsSent]]);
  metrics.countersFrom('ws_signals_refused_total', 'Live signals refused (not joined, no such call, over the call\'s limit)', [], () => [[[], gateway.stats.signalsRefused]]);
  metrics.countersFrom('ws_commands_total', 'Command frames answered, by command and status (docs/signaling.md "Commands")', ['command', 'status'], () =>
    [...gateway.stats.commands].map(([key, n]): [string[], number] => [key.split(' '), n]),
  );
  metrics.countersFrom('ws_rate_limited_total', 'Sockets closed for too many client messages (4029)', [], () => [[[], gateway.stats.rateLimited]]);
  metrics.countersFrom('ws_admissions_refused_total', 'Sockets closed at once with 1013 by admission control (WS_ADMISSIONS_PER_S)', [], () => [[[], gateway.admission.refused]]);
  metrics.countersFrom('ws_slow_consumers_closed_total', 'Sockets closed as slow consumers (4008)', [], () => [[[], gateway.stats.slowConsumersClosed]]);
  return {
    gateway,
    async close() {
      gateway.closeAll();
      subscriber.disconnect();
    },
  };
}

