/**
 * What a browser page runs to be one device of a call through Janus's VideoRoom (docs/api.md
 * "Media session"): Janus's WebSocket API (subprotocol `janus-protocol`) with the media-session
 * `sfu.token` as the session token and the join token, one publisher handle sending the fake
 * camera and microphone, and one subscriber handle per remote feed. ICE is gathered completely
 * before each SDP is sent (no trickle). Serialised with `toString()` and run in the page, so it
 * uses nothing but browser APIs.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
// Browser globals, as far as this code uses them (the project's TypeScript has no DOM library).
declare const WebSocket: any;
declare const RTCPeerConnection: any;
declare const navigator: any;
type Pc = any;

export async function janusPeerInPage(opts: { url: string; room: number; token: string; iceServers: unknown[]; display: string }): Promise<void> {
  const w = globalThis as unknown as { janusPeer: { inboundBytes(): Promise<number>; feeds: number[]; errors: string[]; states(): string[] } };
  const ws = new WebSocket(opts.url, 'janus-protocol');
  await new Promise((res, rej) => {
    ws.onopen = res;
    ws.onerror = () => rej(new Error(`websocket to ${opts.url} failed`));
  });
  const waiting = new Map<string, (m: any) => void>();
  const events: ((m: any) => void)[] = [];
  const errors: string[] = [];
  ws.onmessage = (e: { data: string }) => {
    const m = JSON.parse(e.data as string);
    if (m.janus === 'ack' || m.janus === 'keepalive') return;
    const t = m.transaction as string | undefined;
    if (t && waiting.has(t)) {
      waiting.get(t)!(m);
      waiting.delete(t);
      return;
    }
    for (const on of events) on(m);
  };
  let n = 0;
  const send = (msg: Record<string, unknown>): Promise<any> =>
    new Promise((res, rej) => {
      const transaction = `t${++n}`;
      waiting.set(transaction, (m) => (m.janus === 'error' ? rej(new Error(JSON.stringify(m.error))) : res(m)));
      ws.send(JSON.stringify({ ...msg, transaction, token: opts.token }));
    });
  const session = (await send({ janus: 'create' })).data.id as number;
  setInterval(() => ws.send(JSON.stringify({ janus: 'keepalive', session_id: session, transaction: `k${++n}`, token: opts.token })), 15_000);
  const attach = async () => (await send({ janus: 'attach', session_id: session, plugin: 'janus.plugin.videoroom' })).data.id as number;
  const message = async (handle: number, body: Record<string, unknown>, jsep?: unknown) => {
    const m = await send({ janus: 'message', session_id: session, handle_id: handle, body, ...(jsep ? { jsep } : {}) });
    const data = m.plugindata?.data ?? {};
    if (data.error_code) throw new Error(`videoroom ${data.error_code}: ${data.error}`);
    return m;
  };
  const newPc = () => new RTCPeerConnection({ iceServers: opts.iceServers });
  const gathered = (pc: Pc) =>
    new Promise<void>((res) => {
      if (pc.iceGatheringState === 'complete') return res();
      pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && res());
    });
  const pcs: Pc[] = [];
  const feeds: number[] = [];

  const subscribe = async (feed: number) => {
    if (feeds.includes(feed)) return;
    feeds.push(feed);
    const handle = await attach();
    const joined = await message(handle, { request: 'join', ptype: 'subscriber', room: opts.room, token: opts.token, streams: [{ feed }] });
    const pc = newPc();
    pcs.push(pc);
    await pc.setRemoteDescription(joined.jsep);
    await pc.setLocalDescription(await pc.createAnswer());
    await gathered(pc);
    await message(handle, { request: 'start', room: opts.room }, pc.localDescription!.toJSON());
  };
  const publishersIn = (m: any): number[] => ((m.plugindata?.data?.publishers ?? []) as { id: number }[]).map((p) => p.id);
  events.push((m) => {
    for (const id of publishersIn(m)) subscribe(id).catch((e: Error) => errors.push(e.message));
  });

  const pub = await attach();
  const joined = await message(pub, { request: 'join', ptype: 'publisher', room: opts.room, token: opts.token, display: opts.display });
  const media = await navigator.mediaDevices.getUserMedia({ audio: true, video: true });
  const pc = newPc();
  pcs.push(pc);
  for (const track of media.getTracks() as unknown[]) pc.addTrack(track, media);
  await pc.setLocalDescription(await pc.createOffer());
  await gathered(pc);
  const configured = await message(pub, { request: 'configure', audio: true, video: true }, pc.localDescription!.toJSON());
  await pc.setRemoteDescription(configured.jsep);
  for (const id of publishersIn(joined)) await subscribe(id);

  w.janusPeer = {
    feeds,
    errors,
    states: () => pcs.map((p) => `${p.iceConnectionState}/${p.connectionState}`),
    async inboundBytes() {
      let bytes = 0;
      for (const p of pcs) {
        (await p.getStats()).forEach((s: any) => {
          if (s.type === 'inbound-rtp') bytes += s.bytesReceived ?? 0;
        });
      }
      return bytes;
    },
  };
}
