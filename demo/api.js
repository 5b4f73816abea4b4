// The softphone's client of the backend: HTTP calls (README "API") and the signaling socket
// (docs/signaling.md) with resume by cursor. Plain ES module, no dependencies.

/** An HTTP error with the problem+json body (README "Errors"). */
export class ProblemError extends Error {
  constructor(status, problem) {
    super(problem?.detail ? `${problem.code}: ${problem.detail}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem ?? {};
  }
}

export function newId() {
  return crypto.randomUUID();
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  async request(method, path, body) {
    const res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    const json = text ? JSON.parse(text) : undefined;
    if (!res.ok) throw new ProblemError(res.status, json);
    return json;
  }

  /**
   * A call operation with an operationId, retried with the same operationId while the server is
   * unreachable or answers 503/429 (README "Idempotency": a retry is safe).
   */
  async operation(path, body, attempts = 4) {
    const withId = { operationId: newId(), ...body };
    for (let i = 1; ; i++) {
      try {
        return await this.request('POST', path, withId);
      } catch (err) {
        const retryable = !(err instanceof ProblemError) || err.status === 503 || err.status === 429;
        if (!retryable || i >= attempts) throw err;
        await new Promise((r) => setTimeout(r, 300 * i));
      }
    }
  }

  createCall(calleeUserId, video) {
    return this.operation('/v1/calls', { callId: newId(), calleeUserId, video });
  }
  answer(callId, installationId) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/answer`, { installationId });
  }
  end(callId, reason) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/end`, { reason });
  }
  mediaSession(callId) {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/media-session`, {});
  }
  sendMessage(callId, payload) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/messages`, { payload });
  }
  messagesAfter(callId, afterSeq) {
    return this.request('GET', `/v1/calls/${encodeURIComponent(callId)}/messages?afterSeq=${afterSeq}`);
  }
}

/**
 * The signaling socket: connects with the session token, resumes from the last cursor it
 * processed (kept in localStorage per installation), drops repeated eventIds, and reconnects
 * with backoff when the socket drops.
 */
export class Signaling {
  constructor({ token, installationKey, onEvent, onMessage, onStatus, onGap, onSynced }) {
    this.token = token;
    this.cursorKey = `softphone.cursor.${installationKey}`;
    this.cursor = localStorage.getItem(this.cursorKey) || undefined;
    this.handlers = { onEvent, onMessage, onStatus, onGap, onSynced };
    this.seen = new Set();
    this.ws = undefined;
    this.stopped = false;
    this.retries = 0;
  }

  connect() {
    this.stopped = false;
    const url = new URL('/v1/signaling', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('access_token', this.token);
    if (this.cursor) url.searchParams.set('cursor', this.cursor);
    const resumedFrom = this.cursor;
    this.handlers.onStatus('connecting', resumedFrom);
    const ws = new WebSocket(url, 'calling.v1.json');
    this.ws = ws;
    let replayed = 0;
    let synced = false;
    ws.onmessage = (m) => {
      const frame = JSON.parse(m.data);
      switch (frame.type) {
        case 'event':
          if (!synced) replayed++;
          this.saveCursor(frame.cursor);
          if (this.seen.has(frame.event.eventId)) return;
          this.seen.add(frame.event.eventId);
          this.handlers.onEvent(frame.event, !synced);
          return;
        case 'message':
          if (this.seen.has(frame.event.eventId)) return;
          this.seen.add(frame.event.eventId);
          this.handlers.onMessage(frame.event);
          return;
        case 'gap':
          this.saveCursor(frame.cursor);
          this.handlers.onGap(frame.reason);
          return;
        case 'synced': {
          // A second `synced` on this socket: the server re-read the log after losing its Redis
          // subscription for a moment (docs/signaling.md "In-call messages").
          const again = synced;
          synced = true;
          this.retries = 0;
          this.saveCursor(frame.cursor);
          this.handlers.onStatus('online', resumedFrom);
          this.handlers.onSynced({ resumedFrom, replayed, again });
          return;
        }
      }
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      this.handlers.onStatus('offline', undefined, e.code);
      if (this.stopped || e.code === 4001) return;
      const delay = Math.min(10_000, 500 * 2 ** this.retries++);
      setTimeout(() => {
        if (!this.stopped && !this.ws) this.connect();
      }, delay);
    };
  }

  /** Drops the socket and connects again from the last cursor (what a phone does after a network change). */
  reconnect() {
    const ws = this.ws;
    this.ws = undefined;
    ws?.close(1000, 'reconnect');
    this.connect();
  }

  stop() {
    this.stopped = true;
    const ws = this.ws;
    this.ws = undefined;
    ws?.close(1000, 'stopped');
    this.handlers.onStatus('offline');
  }

  saveCursor(cursor) {
    this.cursor = cursor;
    localStorage.setItem(this.cursorKey, cursor);
  }
}
