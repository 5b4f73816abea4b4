// The softphone's client of the backend: HTTP calls (README "API") and the signaling socket
// (docs/signaling.md) with resume by cursor; answer, end, invite, ringing receipts and in-call
// messages go over the socket as command frames while it is open (docs/signaling.md "Commands").
// Plain ES module, no dependencies.

/** An HTTP error with the problem+json body (README "Errors"). */
export class ProblemError extends Error {
  constructor(status, problem, retryAfterS) {
    super(problem?.detail ? `${problem.code}: ${problem.detail}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem ?? {};
    /** The reply's retry-after, in seconds (429; 503 sfu_unavailable: the SFU is down). */
    this.retryAfterS = retryAfterS;
  }
}

export function newId() {
  return crypto.randomUUID();
}

/** The socket could not carry a command (not open, or closed before the reply): retry it over HTTP. */
class SocketUnavailable extends Error {}

export class Api {
  constructor(token) {
    this.token = token;
    /** The Signaling whose socket carries commands while it is open (set by the app). */
    this.signaling = undefined;
  }

  async request(method, path, body) {
    const res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    const json = text ? JSON.parse(text) : undefined;
    const retryAfter = res.headers.get('retry-after');
    if (!res.ok) throw new ProblemError(res.status, json, retryAfter === null ? undefined : Number(retryAfter));
    return json;
  }

  /**
   * A call operation with an operationId, retried with the same operationId while the server is
   * unreachable or answers 503/429 (README "Idempotency": a retry is safe, whichever transport
   * carries it). `command` (a frame type and its callId) sends it over the open socket instead.
   */
  async operation(path, body, command, attempts = 4) {
    const withId = { operationId: newId(), ...body };
    for (let i = 1; ; i++) {
      try {
        if (command && this.signaling?.isOpen()) {
          try {
            const reply = await this.signaling.command(command.type, command.callId, withId);
            if (reply.status >= 400) throw new ProblemError(reply.status, reply.body);
            return reply.body;
          } catch (err) {
            if (!(err instanceof SocketUnavailable)) throw err;
          }
        }
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
  /** A group call (docs/group-calls.md): several users rung into one call, with an optional title. */
  createGroupCall(calleeUserIds, title, video) {
    return this.operation('/v1/calls', { callId: newId(), calleeUserIds, ...(title ? { title } : {}), video });
  }
  /** Rings more users into a live group call, from this installation in it. */
  invite(callId, userIds) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/invite`, { userIds }, { type: 'invite', callId });
  }
  /** The ringing receipt: this page shows the incoming call, which reached it over the socket. */
  ringing(callId) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/ringing`, { via: 'socket' }, { type: 'ringing', callId });
  }
  answer(callId, installationId) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/answer`, { installationId }, { type: 'answer', callId });
  }
  /** Moves an accepted call to this installation (docs/protocol.md "Moving a call"), with the revision it saw. */
  move(callId, installationId, expectedRevision) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/move`, { installationId, expectedRevision }, { type: 'move', callId });
  }
  /** Adds a user to this user's block list (docs/call-policy.md): their calls never ring here again. */
  blockUser(userId) {
    return this.request('PUT', '/v1/call-policy', { block: [userId] });
  }
  /** This user's call policy (docs/call-policy.md). */
  callPolicy() {
    return this.request('GET', '/v1/call-policy');
  }
  /** Turns do not disturb on (calls ring out unheard, as missed calls) or off. */
  setDoNotDisturb(on) {
    return this.request('PUT', '/v1/call-policy', { doNotDisturb: { on } });
  }
  getCall(callId) {
    return this.request('GET', `/v1/calls/${encodeURIComponent(callId)}`);
  }
  /** `forAll`: a group call's caller ends it for everyone instead of leaving. */
  end(callId, reason, forAll) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/end`, { reason, ...(forAll ? { forAll } : {}) }, { type: 'end', callId });
  }
  mediaSession(callId) {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/media-session`, {});
  }
  sendMessage(callId, payload) {
    return this.operation(`/v1/calls/${encodeURIComponent(callId)}/messages`, { payload }, { type: 'message', callId });
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
  constructor({ token, installationKey, onEvent, onMessage, onSignal, onStatus, onGap, onSynced }) {
    this.token = token;
    this.cursorKey = `softphone.cursor.${installationKey}`;
    this.cursor = localStorage.getItem(this.cursorKey) || undefined;
    this.handlers = { onEvent, onMessage, onSignal, onStatus, onGap, onSynced };
    this.seen = new Set();
    this.ws = undefined;
    this.stopped = false;
    this.retries = 0;
    /** Commands waiting for their reply frame, by operationId. */
    this.commands = new Map();
  }

  isOpen() {
    return this.ws?.readyState === WebSocket.OPEN;
  }

  /** Sends a command frame; resolves with its reply ({status, body}), rejects with SocketUnavailable. */
  command(type, callId, body) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.reject(new SocketUnavailable('socket not open'));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.commands.delete(body.operationId);
        reject(new SocketUnavailable(`no reply to ${type}`));
      }, 10_000);
      this.commands.set(body.operationId, { resolve, reject, timer, ws });
      ws.send(JSON.stringify({ ...body, type, callId }));
    });
  }

  /** A live signal for the other members in the call (docs/signaling.md "Live signals"): fire and forget. */
  signal(callId, kind, value) {
    if (this.isOpen()) this.ws.send(JSON.stringify({ type: 'signal', callId, kind, value }));
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
          // No cursor: an early copy, ahead of the log; the log's copy follows with its cursor
          // (docs/signaling.md "Early events").
          if (frame.cursor !== undefined) this.saveCursor(frame.cursor);
          if (this.seen.has(frame.event.eventId)) return;
          this.seen.add(frame.event.eventId);
          this.handlers.onEvent(frame.event, !synced);
          return;
        case 'message':
          if (this.seen.has(frame.event.eventId)) return;
          this.seen.add(frame.event.eventId);
          this.handlers.onMessage(frame.event);
          return;
        case 'signal':
          this.handlers.onSignal?.(frame.signal);
          return;
        case 'reply': {
          const pending = this.commands.get(frame.operationId);
          if (!pending) return;
          this.commands.delete(frame.operationId);
          clearTimeout(pending.timer);
          pending.resolve(frame);
          return;
        }
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
      // Commands sent on this socket that got no reply go over HTTP (same operationId).
      for (const [op, c] of this.commands) {
        if (c.ws !== ws) continue;
        this.commands.delete(op);
        clearTimeout(c.timer);
        c.reject(new SocketUnavailable('socket closed before the reply'));
      }
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
