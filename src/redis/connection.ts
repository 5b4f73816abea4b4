import { Redis, type RedisOptions } from 'ioredis';

/**
 * Redis connections. Separate connections serve commands, subscriptions, blocking reads (a
 * blocked or subscribed connection cannot serve anything else) and BullMQ (`queues`: it needs
 * connections that retry for ever, and duplicates this one for its own blocking reads).
 */
export type ConnectionRole = 'commands' | 'subscriber' | 'blocking' | 'queues';

export function connectRedis(url: string, role: ConnectionRole, name: string): Redis {
  const options: RedisOptions = {
    connectionName: `${name}:${role}`,
    // Fail a command fast while Redis is unreachable (the API answers 503) instead of queueing
    // it for ever; reconnects keep going in the background.
    maxRetriesPerRequest: role === 'commands' ? 2 : null,
    // While disconnected, commands fail at once instead of waiting in a queue: the API answers
    // 503 immediately and the client retries (its operationId makes that safe).
    enableOfflineQueue: role !== 'commands',
    // Commands issued in one event-loop turn go out in one write: on loopback or a LAN a write
    // costs far more CPU than encoding the command. (BullMQ's blocking connections inherit it
    // harmlessly: they send one command at a time.)
    enableAutoPipelining: role === 'commands' || role === 'queues',
    ...(role === 'commands' ? { commandTimeout: 5_000 } : {}),
    lazyConnect: true,
  };
  const client = new Redis(url, options);
  // Errors are reported by whoever awaits the commands; an 'error' listener keeps ioredis from
  // printing every reconnect attempt as an unhandled error event.
  client.on('error', () => {});
  return client;
}

/** True for errors that mean "Redis is not reachable right now" (→ 503), not a bug. */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return (
    err.name === 'MaxRetriesPerRequestError' ||
    /Connection is closed|connect ECONNREFUSED|Stream isn't writeable|Command timed out|LOADING|CLUSTERDOWN|TRYAGAIN/.test(err.message)
  );
}
