import { randomUUID } from 'node:crypto';
import { VIDEOROOM } from './janusToken.js';

/** Janus could not be reached, timed out, or failed in itself: the SFU is down, not refusing. */
export class SfuUnavailableError extends Error {
  override name = 'SfuUnavailableError';
}

/** Janus or its VideoRoom plugin answered with an error code (e.g. 426 no such room). */
export class JanusRefusal extends Error {
  override name = 'JanusRefusal';
  constructor(
    readonly code: number,
    reason: string,
  ) {
    super(`janus error ${code}: ${reason}`);
  }
}

/** Janus core codes for a session or handle it no longer knows (idle timeout, restart). */
const SESSION_GONE = new Set([458, 459]);

interface JanusReply {
  janus?: string;
  data?: { id?: number };
  error?: { code?: number; reason?: string };
  plugindata?: { data?: Record<string, unknown> & { error_code?: number; error?: string } };
}

/**
 * The VideoRoom requests of one Janus instance over its HTTP API (Janus's "RESTful, HTTP/JSON"
 * transport): one session with one VideoRoom handle, kept and made again when Janus forgot it
 * (session timeout, a restart). Every request carries the `api_secret`. Room management requests
 * are synchronous in the VideoRoom plugin, so each is one POST and its reply.
 */
export class JanusApi {
  private handle: Promise<string> | undefined;

  constructor(
    readonly url: string,
    private readonly apiSecret: string,
    private readonly timeoutMs: number,
  ) {}

  /** Sends a VideoRoom request; resolves with the plugin's data, throws JanusRefusal on its error code. */
  async videoroom(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    for (let attempt = 0; ; attempt++) {
      const path = await this.handlePath();
      try {
        const reply = await this.post(path, { janus: 'message', body });
        const data = reply.plugindata?.data;
        if (!data) throw new SfuUnavailableError(`janus ${this.url} answered a VideoRoom request without plugin data`);
        if (typeof data.error_code === 'number') throw new JanusRefusal(data.error_code, String(data.error ?? ''));
        return data;
      } catch (err) {
        if (err instanceof JanusRefusal && SESSION_GONE.has(err.code) && attempt === 0) {
          this.handle = undefined;
          continue;
        }
        throw err;
      }
    }
  }

  /** Janus answers its `info` request: readiness (docs/operations.md "SFU media"). */
  async info(): Promise<void> {
    await this.request('GET', '/info');
  }

  private handlePath(): Promise<string> {
    this.handle ??= (async () => {
      const session = await this.post('', { janus: 'create' });
      const handle = await this.post(`/${session.data?.id}`, { janus: 'attach', plugin: VIDEOROOM });
      return `/${session.data?.id}/${handle.data?.id}`;
    })();
    // A failed attempt is not kept: the next request starts a new session.
    this.handle.catch(() => (this.handle = undefined));
    return this.handle;
  }

  private post(path: string, message: Record<string, unknown>): Promise<JanusReply> {
    return this.request('POST', path, { ...message, transaction: randomUUID(), apisecret: this.apiSecret });
  }

  private async request(method: 'GET' | 'POST', path: string, body?: Record<string, unknown>): Promise<JanusReply> {
    let res: Response;
    let reply: JanusReply;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        body: body && JSON.stringify(body),
        headers: body ? { 'content-type': 'application/json' } : {},
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      reply = (await res.json()) as JanusReply;
    } catch (err) {
      throw new SfuUnavailableError(`janus ${this.url} unreachable: ${(err as Error).message}`);
    }
    if (!res.ok) throw new SfuUnavailableError(`janus ${this.url} answered HTTP ${res.status}`);
    if (reply.janus === 'error') throw new JanusRefusal(reply.error?.code ?? 0, reply.error?.reason ?? '');
    return reply;
  }
}
