import type { CallSnapshot } from '../calls/snapshot.js';
import type { EventPayload } from '../events/payloads.js';
import type { MediaCredentials } from '../calls/mediaCredentials.js';
import type { RequestEndReason } from '../calls/reasons.js';

/**
 * A typed client for the HTTP API, usable from Node (tests, bench) and JavaScript apps.
 * Every mutating call carries an operationId (generated unless given) so that retrying the
 * same call object after a timeout is safe.
 */

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  snapshot?: CallSnapshot;
}

export class ProblemError extends Error {
  override name = 'ProblemError';
  constructor(readonly problem: Problem) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
  }
  get code(): string {
    return this.problem.code;
  }
  get status(): number {
    return this.problem.status;
  }
}

export type CallEventsPage =
  | { events: EventPayload[]; nextCursor: string; gap?: undefined }
  | { gap: { reason: 'trimmed' | 'reset' }; events: []; nextCursor: string };

export interface PushTokenRegistration {
  installationId: string;
  kind: 'iosVoip' | 'androidPush';
  appId: string;
  iosEnvironment?: 'production' | 'development';
  tokenSuffix: string;
  updatedAtMs: number;
}

export interface ClientOptions {
  baseUrl: string;
  /** The session token, or a function returning the current one. */
  token: string | (() => string | Promise<string>);
  fetch?: typeof fetch;
}

export class CallingClient {
  private readonly fetchImpl: typeof fetch;
  constructor(private readonly opts: ClientOptions) {
    this.fetchImpl = opts.fetch ?? fetch;
  }

  createCall(input: { calleeUserId: string; callId?: string; video?: boolean; operationId?: string }): Promise<CallSnapshot> {
    return this.request('POST', '/v1/calls', {
      callId: input.callId ?? globalThis.crypto.randomUUID(),
      calleeUserId: input.calleeUserId,
      video: input.video ?? false,
      operationId: input.operationId ?? globalThis.crypto.randomUUID(),
    });
  }

  answer(callId: string, input: { installationId: string; expectedRevision?: string; operationId?: string }): Promise<CallSnapshot> {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/answer`, {
      installationId: input.installationId,
      operationId: input.operationId ?? globalThis.crypto.randomUUID(),
      ...(input.expectedRevision ? { expectedRevision: input.expectedRevision } : {}),
    });
  }

  end(callId: string, input: { reason: RequestEndReason; operationId?: string }): Promise<CallSnapshot> {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/end`, {
      reason: input.reason,
      operationId: input.operationId ?? globalThis.crypto.randomUUID(),
    });
  }

  rename(callId: string, input: { displayName: string; operationId?: string }): Promise<CallSnapshot> {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/rename`, {
      displayName: input.displayName,
      operationId: input.operationId ?? globalThis.crypto.randomUUID(),
    });
  }

  getCall(callId: string): Promise<CallSnapshot> {
    return this.request('GET', `/v1/calls/${encodeURIComponent(callId)}`);
  }

  mediaSession(callId: string): Promise<MediaCredentials> {
    return this.request('POST', `/v1/calls/${encodeURIComponent(callId)}/media-session`, {});
  }

  callEvents(cursor?: string, limit?: number): Promise<CallEventsPage> {
    const q = new URLSearchParams();
    if (cursor) q.set('cursor', cursor);
    if (limit) q.set('limit', String(limit));
    const qs = q.toString();
    return this.request('GET', `/v1/call-events${qs ? `?${qs}` : ''}`);
  }

  putPushToken(
    installationId: string,
    kind: 'iosVoip' | 'androidPush',
    body: { token: string; appId: string; iosEnvironment?: 'production' | 'development' },
  ): Promise<PushTokenRegistration> {
    return this.request('PUT', `/v1/installations/${encodeURIComponent(installationId)}/push-tokens/${kind}`, body);
  }

  async deletePushToken(installationId: string, kind: 'iosVoip' | 'androidPush'): Promise<void> {
    await this.request('DELETE', `/v1/installations/${encodeURIComponent(installationId)}/push-tokens/${kind}`);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const token = typeof this.opts.token === 'function' ? await this.opts.token() : this.opts.token;
    const res = await this.fetchImpl(this.opts.baseUrl + path, {
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
    if (!res.ok) throw new ProblemError(json as Problem);
    return json as T;
  }
}
