import { globalFetch, randomId, type FetchLike } from './runtime.js';
import type {
  CallEventsPage,
  CallHistoryPage,
  CallMessage,
  CallPolicy,
  CallPolicyEdit,
  CallSnapshot,
  EventPayload,
  GapReason,
  MediaSession,
  MessageSent,
  Problem,
  PushTokenKind,
  PushTokenRegistration,
  RequestEndReason,
  RingingVia,
} from './types.js';
import { EventFilter } from './eventFilter.js';
import { SignalingUnavailableError, type SignalingClient } from './signaling.js';


/** A refusal from the server: the RFC 9457 problem it sent (docs/api.md "Errors"), its `code` and `status`. */
export class ProblemError extends Error {
  override name = 'ProblemError';
  constructor(
    readonly problem: Problem,
    /** The reply's `retry-after` in seconds, when it had one (429, 503 `sfu_unavailable`). */
    readonly retryAfterS?: number,
  ) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
  }
  get code(): string {
    return this.problem.code;
  }
  get status(): number {
    return this.problem.status;
  }
}

export interface ClientOptions {
  /** http(s) base URL, e.g. https://calls.example.com */
  baseUrl: string;
  /** The session token, or a function returning the current one. */
  token: string | (() => string | Promise<string>);
  /** Defaults to the global fetch (browsers, Node 20+). */
  fetch?: FetchLike | ((url: string, init: never) => Promise<unknown>);
  /**
   * Sends answer, end, rename, sendMessage, invite and ringing as frames while this client's socket is open (no
   * HTTP round trip). A command the socket could not carry (closed before the reply) is retried
   * over HTTP with the same operationId, which returns its original outcome if it had run.
   */
  signaling?: SignalingClient;
}

export interface CatchUpResult {
  /** Events delivered to `onEvent`, in log order. */
  delivered: number;
  /** The cursor to resume from (signaling or the next catch-up). */
  cursor: string;
}

/**
 * A typed client for the HTTP API (docs/api.md "API"). Every mutating call carries an operationId
 * (generated unless given), so retrying the same call after a timeout is safe. With `signaling`,
 * the call commands (answer, end, rename, sendMessage, invite, ringing) go over its socket while
 * it is open, and over HTTP otherwise (docs/signaling.md "Commands").
 */
export class CallingClient {
  private readonly fetchImpl: FetchLike;
  constructor(private readonly opts: ClientOptions) {
    this.fetchImpl = (opts.fetch as FetchLike | undefined) ?? globalFetch();
    // The signaling client fetches missed in-call messages through this client (docs/devices.md "In-call messages").
    opts.signaling?.useMessageSource((callId, afterSeq) => this.messagesAfter(callId, afterSeq));
  }

  /** Creates a one-to-one call and rings the callee (POST /v1/calls); `callId` is made here unless given, so a retry finds the same call. */
  createCall(input: { calleeUserId: string; callId?: string; video?: boolean; operationId?: string }): Promise<CallSnapshot> {
    return this.request('POST', '/v1/calls', {
      callId: input.callId ?? randomId(),
      calleeUserId: input.calleeUserId,
      video: input.video ?? false,
      operationId: input.operationId ?? randomId(),
    });
  }

  /**
   * Rings several users into one call (docs/group-calls.md "Creating one"): 1 to the server's
   * GROUP_CALL_MAX_MEMBERS distinct users, not yourself. `title` is the invitation's displayName.
   */
  createGroupCall(input: { calleeUserIds: string[]; title?: string; callId?: string; video?: boolean; operationId?: string }): Promise<CallSnapshot> {
    return this.request('POST', '/v1/calls', {
      callId: input.callId ?? randomId(),
      calleeUserIds: input.calleeUserIds,
      ...(input.title !== undefined ? { title: input.title } : {}),
      video: input.video ?? false,
      operationId: input.operationId ?? randomId(),
    });
  }

  /** Rings more users into a live group call, from this installation in it (docs/group-calls.md "Inviting more"). */
  invite(callId: string, input: { userIds: string[]; operationId?: string }): Promise<CallSnapshot> {
    return this.command('invite', 'invite', callId, { userIds: input.userIds, operationId: input.operationId ?? randomId() });
  }

  /**
   * A ringing receipt: this installation shows the incoming call, which reached it by `via`
   * (docs/group-calls.md "Ringing receipts"). The caller's installations get `call.ringing`.
   */
  ringing(callId: string, input: { via: RingingVia; operationId?: string }): Promise<CallSnapshot> {
    return this.command('ringing', 'ringing', callId, { via: input.via, operationId: input.operationId ?? randomId() });
  }

  /** Answers from this installation; one answer wins, the others get ProblemError `answer_conflict` (docs/api.md "Answer"). */
  answer(callId: string, input: { installationId: string; expectedRevision?: string; operationId?: string }): Promise<CallSnapshot> {
    return this.command('answer', 'answer', callId, {
      installationId: input.installationId,
      operationId: input.operationId ?? randomId(),
      ...(input.expectedRevision ? { expectedRevision: input.expectedRevision } : {}),
    });
  }

  /**
   * Moves an accepted call to this installation (docs/protocol.md "Moving a call"), with the
   * revision it saw: the installation it leaves gets `call.ended` `movedElsewhere`, the others in
   * the call `call.moved`. ProblemError `revision_conflict` when another installation moved first,
   * `not_in_call` when the call is not accepted or this user is not in it.
   */
  move(callId: string, input: { installationId: string; expectedRevision: string; operationId?: string }): Promise<CallSnapshot> {
    return this.command('move', 'move', callId, { installationId: input.installationId, expectedRevision: input.expectedRevision, operationId: input.operationId ?? randomId() });
  }

  /**
   * Hangs up, declines or cancels. In a group call a member leaves with it; the caller, from its
   * installation in the call, ends it for everyone with `forAll` (docs/group-calls.md "Leaving,
   * declining, cancelling").
   */
  end(callId: string, input: { reason: RequestEndReason; forAll?: boolean; operationId?: string }): Promise<CallSnapshot> {
    return this.command('end', 'end', callId, {
      reason: input.reason,
      operationId: input.operationId ?? randomId(),
      ...(input.forAll !== undefined ? { forAll: input.forAll } : {}),
    });
  }

  /** Changes the name the callee's screen shows for the call (docs/api.md "Rename"). */
  rename(callId: string, input: { displayName: string; operationId?: string }): Promise<CallSnapshot> {
    return this.command('rename', 'rename', callId, { displayName: input.displayName, operationId: input.operationId ?? randomId() });
  }

  /** An in-call message (SDP, ICE candidates, …) for the other party's installation in the call. */
  sendMessage(callId: string, payload: Record<string, unknown>, input: { operationId?: string } = {}): Promise<MessageSent> {
    return this.command('message', 'messages', callId, { payload, operationId: input.operationId ?? randomId() });
  }

  /** The call's in-call messages for this installation after `afterSeq` (after a reconnect during a call). */
  messagesAfter(callId: string, afterSeq = 0): Promise<{ messages: CallMessage[] }> {
    return this.request('GET', `/v1/calls/${encodeURIComponent(callId)}/messages?afterSeq=${afterSeq}`);
  }

  /** A command over the open socket, else (or when the socket could not carry it) over HTTP. */
  private async command<T>(type: string, path: string, callId: string, body: { operationId: string } & Record<string, unknown>): Promise<T> {
    const signaling = this.opts.signaling;
    if (signaling?.isOpen) {
      try {
        const reply = await signaling.command(type, callId, body);
        if (reply.status >= 400) throw new ProblemError(reply.body as Problem);
        return reply.body as T;
      } catch (err) {
        if (!(err instanceof SignalingUnavailableError)) throw err;
      }
    }
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/${path}`, body);
  }

  /** The call's snapshot (GET /v1/calls/{id}): what to check before ringing for a late push. */
  getCall(callId: string): Promise<CallSnapshot> {
    return this.request('GET', `/v1/calls/${encodeURIComponent(callId)}`);
  }

  mediaSession(callId: string): Promise<MediaSession> {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/media-session`, {});
  }

  /** One page of GET /v1/call-events. Without a cursor: no history, the cursor of the log's head. */
  callEvents(cursor?: string, limit?: number): Promise<CallEventsPage> {
    const q = new URLSearchParams();
    if (cursor) q.set('cursor', cursor);
    if (limit) q.set('limit', String(limit));
    const qs = q.toString();
    return this.request('GET', `/v1/call-events${qs ? `?${qs}` : ''}`);
  }

  /**
   * Reads every page after `cursor` until the server says `hasMore: false`, handing each new event
   * to `onEvent` (repeated eventIds and stale revisions dropped by `filter`). A page may hold no
   * event for this installation and still have more after it: only `hasMore` ends the loop.
   */
  async catchUp(
    cursor: string,
    handlers: { onEvent: (event: EventPayload, cursor: string) => void; onGap?: (reason: GapReason, cursor: string) => void },
    opts: { limit?: number; filter?: EventFilter } = {},
  ): Promise<CatchUpResult> {
    const filter = opts.filter ?? new EventFilter();
    let delivered = 0;
    let at = cursor;
    for (;;) {
      const page = await this.callEvents(at, opts.limit);
      if (page.gap) handlers.onGap?.(page.gap.reason, page.nextCursor);
      for (const event of page.events) {
        if (!filter.accept(event)) continue;
        delivered++;
        handlers.onEvent(event, page.nextCursor);
      }
      at = page.nextCursor;
      if (!page.hasMore) return { delivered, cursor: at };
    }
  }

  /**
   * One page of this user's call history, newest first (GET /v1/calls; docs/call-history.md):
   * pass the page's `nextCursor` as `cursor` for the next; `missed` lists missed calls only.
   */
  history(opts: { cursor?: string; limit?: number; missed?: boolean } = {}): Promise<CallHistoryPage> {
    const q = new URLSearchParams();
    if (opts.cursor) q.set('cursor', opts.cursor);
    if (opts.limit) q.set('limit', String(opts.limit));
    if (opts.missed) q.set('missed', 'true');
    const qs = q.toString();
    return this.request('GET', `/v1/calls${qs ? `?${qs}` : ''}`);
  }

  /** This user's call policy: who may call them (GET /v1/call-policy; the server's docs/call-policy.md). */
  callPolicy(): Promise<CallPolicy> {
    return this.request('GET', '/v1/call-policy');
  }

  /**
   * Changes this user's call policy (PUT /v1/call-policy): the mode, and users blocked or
   * unblocked, at once.
   */
  editCallPolicy(edit: CallPolicyEdit): Promise<CallPolicy> {
    return this.request('PUT', '/v1/call-policy', edit);
  }

  /** Registers this installation's VoIP (iOS) or FCM (Android) push token (docs/devices.md "Register push tokens"). */
  putPushToken(
    installationId: string,
    kind: PushTokenKind,
    body: { token: string; appId: string; iosEnvironment?: 'production' | 'development' },
  ): Promise<PushTokenRegistration> {
    return this.request('PUT', `/v1/installations/${encodeURIComponent(installationId)}/push-tokens/${kind}`, body);
  }

  /** Removes a push token (sign-out). */
  async deletePushToken(installationId: string, kind: PushTokenKind): Promise<void> {
    await this.request('DELETE', `/v1/installations/${encodeURIComponent(installationId)}/push-tokens/${kind}`);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const token = typeof this.opts.token === 'function' ? await this.opts.token() : this.opts.token;
    const res = await this.fetchImpl(this.opts.baseUrl.replace(/\/+$/, '') + path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ProblemError({ type: 'about:blank', title: 'Bad response', status: res.status, detail: `not JSON: ${text.slice(0, 200)}`, code: 'bad_response' });
    }
    const retryAfter = Number(res.headers?.get('retry-after') ?? NaN);
    if (!res.ok) throw new ProblemError(json as Problem, Number.isFinite(retryAfter) ? retryAfter : undefined);
    return json as T;
  }
}
