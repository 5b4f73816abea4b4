// Generated from packages/client/src/media.ts by `npm run demo-client`: edit that file, not this one.
/** `start()` or `refresh()` after `stop()`, or one that was waiting when `stop()` came. */
export class MediaSessionStoppedError extends Error {
    name = 'MediaSessionStoppedError';
    constructor() {
        super('media session: stopped');
    }
}
/** The shortest time between two timed renewals, in ms. */
const MIN_RENEWAL_MS = 1000;
/**
 * How long to wait before asking again after `err` (attempt `n`, from 0), or undefined: do not.
 * Exported for tests and for clients that schedule their own requests.
 */
export function mediaSessionRetryDelay(err, n, maxBackoffMs = 30_000) {
    const e = (typeof err === 'object' && err !== null ? err : {});
    const status = typeof e.status === 'number' ? e.status : undefined;
    const code = typeof e.code === 'string' ? e.code : typeof e.problem?.code === 'string' ? e.problem.code : undefined;
    const retryAfterS = typeof e.retryAfterS === 'number' && e.retryAfterS >= 0 ? e.retryAfterS : undefined;
    if ((status === 503 && code === 'sfu_unavailable') || status === 429)
        return retryAfterS === undefined ? undefined : retryAfterS * 1000;
    if (status === undefined || status === 401 || status >= 500)
        return Math.random() * Math.min(maxBackoffMs, 1000 * 2 ** n);
    return undefined;
}
export class MediaSessionKeeper {
    o;
    /** The latest session, once there is one. */
    current;
    /** When the next timed renewal is due (epoch ms), while one is scheduled. */
    renewsAtMs;
    timer;
    inFlight;
    wake;
    stopped = false;
    constructor(o) {
        this.o = o;
        const renewAt = o.renewAt ?? 0.8;
        if (!(renewAt > 0 && renewAt < 1))
            throw new RangeError('MediaSessionKeeper: renewAt must be between 0 and 1');
    }
    /** The first session (retried as above); renewals follow on their own. */
    start() {
        return this.fetch('first');
    }
    /** A new session now (before an ICE restart, or to reconnect to the SFU); shares one in flight. */
    refresh() {
        return this.fetch('refresh');
    }
    /** No more requests or renewals; a request waiting to be retried rejects with MediaSessionStoppedError. */
    stop() {
        this.stopped = true;
        clearTimeout(this.timer);
        this.renewsAtMs = undefined;
        this.wake?.();
    }
    fetch(reason) {
        if (this.stopped)
            return Promise.reject(new MediaSessionStoppedError());
        if (this.inFlight)
            return this.inFlight;
        clearTimeout(this.timer);
        this.renewsAtMs = undefined;
        const p = this.attempt(reason).finally(() => {
            if (this.inFlight === p)
                this.inFlight = undefined;
        });
        this.inFlight = p;
        return p;
    }
    async attempt(reason) {
        for (let n = 0;; n++) {
            let session;
            try {
                session = await this.o.client.mediaSession(this.o.callId);
            }
            catch (err) {
                if (this.stopped)
                    throw new MediaSessionStoppedError();
                const delay = mediaSessionRetryDelay(err, n, this.o.maxBackoffMs);
                if (delay === undefined) {
                    this.stop();
                    this.o.onStopped?.(err);
                    throw err;
                }
                this.o.onRetry?.(err, delay);
                await this.sleep(delay);
                if (this.stopped)
                    throw new MediaSessionStoppedError();
                continue;
            }
            if (this.stopped)
                throw new MediaSessionStoppedError();
            this.current = session;
            this.schedule(session);
            this.o.onSession(session, reason);
            return session;
        }
    }
    schedule(session) {
        // Not sooner than MIN_RENEWAL_MS: a device clock far ahead of the server's would otherwise see
        // every session as expired and ask again at once, without end.
        const delay = Math.max(MIN_RENEWAL_MS, (session.expiresAtMs - Date.now()) * (this.o.renewAt ?? 0.8));
        this.renewsAtMs = Date.now() + delay;
        // A renewal that fails for good is reported through onStopped; a stop() rejects it quietly.
        this.timer = setTimeout(() => void this.fetch('renewal').catch(() => undefined), delay);
    }
    sleep(ms) {
        return new Promise((resolve) => {
            const t = setTimeout(done, ms);
            const wake = () => {
                clearTimeout(t);
                done();
            };
            function done() {
                resolve();
            }
            this.wake = wake;
        });
    }
}
