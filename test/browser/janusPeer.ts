/**
 * What a browser page runs to be one device of a call through Janus's VideoRoom (docs/api.md
 * "Media session"): Janus's WebSocket API (subprotocol `janus-protocol`) with the media-session
 * `sfu.token` as the session token and the join token, one publisher handle sending the fake
 * camera and microphone (joined as `sfu.participantId`, which the backend kicks when the device
 * leaves the call), and one subscriber handle per remote feed, each naming the publisher's
 * `private_id` (the backend's rooms require it). ICE is gathered completely before each SDP is
 * sent (no trickle); `relayOnly` allows TURN relay candidates only. It notes when each feed's
 * first video frame was decoded (`firstFrameAtMs`, polled every 10 ms) and which feeds a kick or
 * unpublish took away (`gone`). Serialised with `toString()` and run in the page, so it uses
 * nothing but browser APIs.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
// Browser globals, as far as this code uses them (the project's TypeScript has no DOM library).
declare const WebSocket: any;
declare const RTCPeerConnection: any;
declare const navigator: any;
type Pc = any;

/** What a page exposes as `globalThis.janusPeer`. */
export interface JanusPeer {
  feeds: number[];
  errors: string[];
  /** Feeds whose publisher left the room (unpublished, kicked), and whether this page was kicked (`kicked`). */
  gone: number[];
  kicked: boolean;
  firstFrameAtMs: Record<number, number>;
  /** When each feed was announced to this page, and when its subscriber connection connected. */
  announcedAtMs: Record<number, number>;
  connectedAtMs: Record<number, number>;
  /** When this page's own publisher connection connected. */
  publishedAtMs?: number;
  states(): string[];
  inboundBytes(): Promise<number>;
  /** Inbound RTP bytes per subscribed feed. */
  feedBytes(): Promise<Record<number, number>>;
  /** The type (host, srflx, relay) of the local candidate each peer connection's selected pair uses. */
  localCandidateTypes(): Promise<string[]>;
}

export async function janusPeerInPage(opts: {
  url: string;
  room: number;
  token: string;
  participantId?: number;
  iceServers: unknown[];
  display: string;
  relayOnly?: boolean;
}): Promise<void> {
  const w = globalThis as unknown as { janusPeer: JanusPeer };
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
  const newPc = () => new RTCPeerConnection({ iceServers: opts.iceServers, ...(opts.relayOnly ? { iceTransportPolicy: 'relay' } : {}) });
  const gathered = (pc: Pc) =>
    new Promise<void>((res) => {
      if (pc.iceGatheringState === 'complete') return res();
      pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && res());
    });
  const pcs: Pc[] = [];
  const feeds: number[] = [];
  const feedPcs = new Map<number, Pc>();
  const gone: number[] = [];
  const firstFrameAtMs: Record<number, number> = {};
  const announcedAtMs: Record<number, number> = {};
  const connectedAtMs: Record<number, number> = {};
  let publishedAtMs: number | undefined;
  const whenConnected = (pc: Pc, note: (atMs: number) => void) =>
    pc.addEventListener('connectionstatechange', () => pc.connectionState === 'connected' && note(Date.now()));
  let privateId: number | undefined;
  let kicked = false;
  const framesDecoded = async (pc: Pc) => {
    let frames = 0;
    (await pc.getStats()).forEach((s: any) => {
      if (s.type === 'inbound-rtp' && s.kind === 'video') frames += s.framesDecoded ?? 0;
    });
    return frames;
  };
  const watchFirstFrame = (feed: number, pc: Pc) => {
    const poll = setInterval(() => {
      framesDecoded(pc).then((frames) => {
        if (frames > 0 && firstFrameAtMs[feed] === undefined) {
          firstFrameAtMs[feed] = Date.now();
          clearInterval(poll);
        }
      }, () => {});
    }, 10);
  };

  const subscribe = async (feed: number) => {
    if (feeds.includes(feed)) return;
    feeds.push(feed);
    announcedAtMs[feed] = Date.now();
    const handle = await attach();
    const joined = await message(handle, { request: 'join', ptype: 'subscriber', room: opts.room, token: opts.token, private_id: privateId, streams: [{ feed }] });
    const pc = newPc();
    pcs.push(pc);
    feedPcs.set(feed, pc);
    watchFirstFrame(feed, pc);
    whenConnected(pc, (at) => (connectedAtMs[feed] ??= at));
    await pc.setRemoteDescription(joined.jsep);
    await pc.setLocalDescription(await pc.createAnswer());
    await gathered(pc);
    await message(handle, { request: 'start', room: opts.room }, pc.localDescription!.toJSON());
  };
  const publishersIn = (m: any): number[] => ((m.plugindata?.data?.publishers ?? []) as { id: number }[]).map((p) => p.id);
  events.push((m) => {
    const data = m.plugindata?.data ?? {};
    for (const id of publishersIn(m)) subscribe(id).catch((e: Error) => errors.push(e.message));
    for (const key of ['unpublished', 'leaving', 'kicked']) {
      if (typeof data[key] === 'number' && !gone.includes(data[key])) gone.push(data[key]);
    }
    if (data.videoroom === 'event' && data.leaving === 'ok' && data.reason === 'kicked') kicked = true;
    if (opts.participantId !== undefined && data.kicked === opts.participantId) kicked = true;
  });

  const pub = await attach();
  const joined = await message(pub, {
    request: 'join',
    ptype: 'publisher',
    room: opts.room,
    token: opts.token,
    display: opts.display,
    ...(opts.participantId === undefined ? {} : { id: opts.participantId }),
  });
  privateId = joined.plugindata?.data?.private_id;
  const media = await navigator.mediaDevices.getUserMedia({ audio: true, video: true });
  const pc = newPc();
  pcs.push(pc);
  whenConnected(pc, (at) => (publishedAtMs ??= at));
  for (const track of media.getTracks() as unknown[]) pc.addTrack(track, media);
  await pc.setLocalDescription(await pc.createOffer());
  await gathered(pc);
  const configured = await message(pub, { request: 'configure', audio: true, video: true }, pc.localDescription!.toJSON());
  await pc.setRemoteDescription(configured.jsep);
  for (const id of publishersIn(joined)) await subscribe(id);

  w.janusPeer = {
    feeds,
    errors,
    gone,
    get kicked() {
      return kicked;
    },
    firstFrameAtMs,
    announcedAtMs,
    connectedAtMs,
    get publishedAtMs() {
      return publishedAtMs;
    },
    async localCandidateTypes() {
      const types: string[] = [];
      for (const p of pcs) {
        const stats = new Map<string, any>();
        (await p.getStats()).forEach((s: any) => stats.set(s.id, s));
        const transport = [...stats.values()].find((s) => s.type === 'transport');
        const pair = stats.get(transport?.selectedCandidatePairId);
        types.push(stats.get(pair?.localCandidateId)?.candidateType ?? 'none');
      }
      return types;
    },
    async feedBytes() {
      const bytes: Record<number, number> = {};
      for (const [feed, p] of feedPcs) {
        bytes[feed] = 0;
        (await p.getStats()).forEach((s: any) => {
          if (s.type === 'inbound-rtp') bytes[feed]! += s.bytesReceived ?? 0;
        });
      }
      return bytes;
    },
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
