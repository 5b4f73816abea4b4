import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { ClusterNode } from '../config/config.js';

/**
 * Redis connections. Separate connections serve commands, subscriptions, blocking reads (a
 * blocked or subscribed connection cannot serve anything else) and BullMQ (`queues`: it needs
 * connections that retry for ever, and duplicates this one for its own blocking reads).
 *
 * A deployment names either one Redis (`REDIS_URL`) or a Redis Cluster by seed nodes
 * (`REDIS_CLUSTER_NODES`); every connection of the process is then of that kind (docs/operations.md
 * "Redis Cluster"). Every key one command or script touches shares a hash tag, so each call is
 * routed to the one primary that holds its slot.
 */
export type ConnectionRole = 'commands' | 'subscriber' | 'blocking' | 'queues';

export type RedisClient = Redis | Cluster;


/** Where Redis is: a URL of one server, or the seed nodes of a cluster. */
export type RedisTarget = string | { cluster: ClusterNode[] };

/**
 * One Redis or a Redis Cluster (docs/operations.md "Redis Cluster"), decided once, here, from the
 * client. On one Redis a call script may also touch keys outside its call's hash tag (publish the
 * change's early events, bind the user's operationId) and the relay may carry its next read in the
 * write that appends events: any key is reachable from any script. On a cluster those keys live
 * in other slots, so those steps are separate commands.
 */
export type Topology = 'single' | 'cluster';

export function topologyOf(client: RedisClient): Topology {
  return (client as Cluster).isCluster === true ? 'cluster' : 'single';
}

/** The servers that hold keys: the one Redis, or every primary of the cluster (for SCAN, SCRIPT LOAD). */
export function primaries(client: RedisClient): Redis[] {
  return topologyOf(client) === 'cluster' ? (client as Cluster).nodes('master') : [client as Redis];
}

export function describeTarget(target: RedisTarget): string {
  return typeof target === 'string' ? target : `cluster ${target.cluster.map((n) => `${n.host}:${n.port}`).join(',')}`;
}

/** Default bound on a command of the `commands` role (REDIS_COMMAND_TIMEOUT_MS). */
export const DEFAULT_COMMAND_TIMEOUT_MS = 500;

export function connectRedis(target: string, role: ConnectionRole, name: string, commandTimeoutMs?: number): Redis;
export function connectRedis(target: RedisTarget, role: ConnectionRole, name: string, commandTimeoutMs?: number): RedisClient;
export function connectRedis(target: RedisTarget, role: ConnectionRole, name: string, commandTimeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): RedisClient {
  const options: RedisOptions = {
    connectionName: `${name}:${role}`,
    // Fail a command fast while Redis is unreachable (the API answers 503) instead of queueing
    // it for ever; reconnects keep going in the background. A blocking read fails too, so its
    // loop sends a new one, routed to wherever the key lives now (after a failover).
    maxRetriesPerRequest: role === 'commands' ? 2 : role === 'blocking' ? 1 : null,
    // While disconnected, commands fail at once instead of waiting in a queue: the API answers
    // 503 immediately and the client retries (its operationId makes that safe); a blocking read
    // fails and its loop tries again (a queued one could outlive the reader that sent it).
    enableOfflineQueue: role === 'subscriber' || role === 'queues',
    // Commands issued in one event-loop turn go out in one write: on loopback or a LAN a write
    // costs far more CPU than encoding the command. (BullMQ's blocking connections inherit it
    // harmlessly: they send one command at a time.)
    enableAutoPipelining: role === 'commands' || role === 'queues',
    // A stalled Redis (up but not answering) fails a command after commandTimeoutMs, so a request
    // answers 503 instead of hanging. Blocking reads block for at most a second (the relay's
    // BLOCK): one that hangs far longer is on a connection that died without telling.
    ...(role === 'commands' ? { commandTimeout: commandTimeoutMs } : role === 'blocking' ? { commandTimeout: 10_000 } : {}),
    lazyConnect: true,
  };
  let client: RedisClient;
  if (typeof target === 'string') {
    client = new Redis(target, options);
  } else {
    const { enableAutoPipelining, enableOfflineQueue, lazyConnect, ...rest } = options;
    // Per node too: a command for a primary that died must fail, not wait for it to come back.
    const perNode: RedisOptions = { ...rest, enableOfflineQueue };
    const clusterOptions: ClusterOptions = {
      redisOptions: perNode,
      enableAutoPipelining,
      enableOfflineQueue,
      lazyConnect,
      // Every command goes to the primary of its slot (reads included: replicas lag).
      scaleReads: 'master',
      // SSUBSCRIBE per slot owner: a gateway holds one subscriber connection per primary, and
      // ioredis moves the subscriptions when slots move (failover, resharding).
      shardedSubscribers: role === 'subscriber',
      // While a primary fails over, its slots answer CLUSTERDOWN / TRYAGAIN / MOVED for a few
      // seconds: retry briefly, then fail (the API answers 503 with retry-after).
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      retryDelayOnTryAgain: 200,
      maxRedirections: 16,
      slotsRefreshTimeout: 2_000,
      // Auto-pipelined commands that meet a MOVED (slots moved by a failover) fail instead of
      // being redirected one by one: keep the slot map fresh so the next try goes right.
      slotsRefreshInterval: 1_000,
      clusterRetryStrategy: (times) => Math.min(100 * times, 2_000),
    };
    client = new Cluster(target.cluster, clusterOptions);
  }
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
    /Connection is closed|connect ECONNREFUSED|Stream isn't writeable|Command timed out|LOADING|CLUSTERDOWN|TRYAGAIN|MOVED|ASK |Too many Cluster redirections|Failed to refresh slots cache|None of startup nodes is available|Cluster isn't ready/.test(
      err.message,
    )
  );
}
