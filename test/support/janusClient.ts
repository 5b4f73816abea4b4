import { randomUUID } from 'node:crypto';

/**
 * A device's side of Janus's HTTP API, as its own documentation describes it ("RESTful, HTTP/JSON"
 * transport): create a session with a token, attach the VideoRoom plugin, send `join`, and
 * long-poll the session for the plugin's answer. The answer comes from Janus itself: the tests
 * ask Janus whether a credential opens a room, never the code under test. Also what an operator
 * asks Janus with the API secret and the admin key: which rooms exist.
 */

interface Reply {
  janus: string;
  data?: { id: number };
  error?: { code: number; reason: string };
  plugindata?: { data: Record<string, unknown> & { error_code?: number; videoroom?: string } };
}

async function post(url: string, body: Record<string, unknown>): Promise<Reply> {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify({ transaction: randomUUID(), ...body }) });
  return (await res.json()) as Reply;
}

/** How a join went: `joined`, or the error code of Janus (403: token refused) or of VideoRoom (433: not allowed, 426: no such room). */
export type JoinOutcome = { joined: true } | { joined: false; code: number; stage: 'session' | 'attach' | 'join' };

/** Joins `room` as a publisher with `token` as the session token and the VideoRoom join token, then leaves. */
export async function joinRoom(apiUrl: string, room: number, token: string, id?: number): Promise<JoinOutcome> {
  const { outcome, leave } = await stayInRoom(apiUrl, room, token, id);
  await leave();
  return outcome;
}

/** Joins as `joinRoom` does (as publisher `id`, when given) and stays until `leave()`. */
export async function stayInRoom(
  apiUrl: string,
  room: number,
  token: string,
  id?: number,
): Promise<{ outcome: JoinOutcome; leave: () => Promise<void>; keepalive: (token: string) => Promise<'ack' | number> }> {
  const session = await post(apiUrl, { janus: 'create', token });
  const gone = async () => 458;
  if (session.janus !== 'success') return { outcome: { joined: false, code: session.error!.code, stage: 'session' }, leave: async () => {}, keepalive: gone };
  const sessionUrl = `${apiUrl}/${session.data!.id}`;
  const leave = async () => void (await post(sessionUrl, { janus: 'destroy', token }).catch(() => {}));
  // Janus's answer to a keepalive with this token: `ack`, or its error code (403: token refused).
  const keepalive = async (t: string) => {
    const reply = await post(sessionUrl, { janus: 'keepalive', token: t });
    return reply.janus === 'ack' ? ('ack' as const) : (reply.error?.code ?? 0);
  };
  const outcome = await joined(sessionUrl, room, token, id).catch(async (err: unknown) => {
    await leave();
    throw err;
  });
  return { outcome, leave, keepalive };
}

async function joined(sessionUrl: string, room: number, token: string, id: number | undefined): Promise<JoinOutcome> {
  const handle = await post(sessionUrl, { janus: 'attach', plugin: 'janus.plugin.videoroom', token });
  if (handle.janus !== 'success') return { joined: false, code: handle.error!.code, stage: 'attach' };
  const ack = await post(`${sessionUrl}/${handle.data!.id}`, { janus: 'message', token, body: { request: 'join', ptype: 'publisher', room, token, display: 'test', ...(id === undefined ? {} : { id }) } });
  if (ack.janus === 'error') return { joined: false, code: ack.error!.code, stage: 'join' };
  // The join is answered asynchronously: long-poll the session for the plugin's event.
  for (;;) {
    const res = await fetch(`${sessionUrl}?maxev=1&token=${encodeURIComponent(token)}`);
    const ev = (await res.json()) as Reply;
    if (ev.janus === 'keepalive') continue;
    if (ev.janus === 'error') return { joined: false, code: ev.error!.code, stage: 'join' };
    const data = ev.plugindata?.data;
    if (!data) continue;
    if (data.videoroom === 'joined') return { joined: true };
    if (typeof data.error_code === 'number') return { joined: false, code: data.error_code, stage: 'join' };
  }
}

/** The operator's view: VideoRoom requests with the API secret and the admin key. */
export async function videoroomAdmin(apiUrl: string, apiSecret: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const session = await post(apiUrl, { janus: 'create', apisecret: apiSecret });
  const sessionUrl = `${apiUrl}/${session.data!.id}`;
  try {
    const handle = await post(sessionUrl, { janus: 'attach', plugin: 'janus.plugin.videoroom', apisecret: apiSecret });
    const reply = await post(`${sessionUrl}/${handle.data!.id}`, { janus: 'message', apisecret: apiSecret, body });
    return reply.plugindata!.data;
  } finally {
    await post(sessionUrl, { janus: 'destroy', apisecret: apiSecret }).catch(() => {});
  }
}

/** The room numbers Janus holds (private ones too: listed with the admin key). */
export async function janusRooms(apiUrl: string, apiSecret: string, adminKey: string): Promise<number[]> {
  const data = await videoroomAdmin(apiUrl, apiSecret, { request: 'list', admin_key: adminKey });
  return (data.list as { room: number }[]).map((r) => r.room);
}
