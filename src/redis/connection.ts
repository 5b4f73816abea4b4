import { Redis, type RedisOptions } from 'ioredis';

/**
 * Redis connections. Separate connections serve commands, subscriptions and blocking reads
 * (a blocked or subscribed connection cannot serve anything else).
 */
export type ConnectionRole = 'commands' | 'subscriber' | 'blocking';

export function connectRedis(url: string, role: ConnectionRole, name: string): Redis {
  const options: RedisOptions = {
    connectionName: `${name}:${role}`,
    // Fail a command fast while Redis is unreachable (the API answers 503) instead of queueing
    // it for ever; reconnects keep going in the background.
    maxRetriesPerRequest: role === 'commands' ? 2 : null,
    // While disconnected, commands fail at once instead of waiting in a queue: the API answers
    // 503 immediately and the client retries (its operationId makes that safe).
    enableOfflineQueue: role !== 'commands',
    enableAutoPipelining: role === 'commands',
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
