// A group call's media on the softphone page, through Janus's VideoRoom (docs/api.md "Media
// session", `kind: "janus"`): Janus's WebSocket API with the media-session `sfu.token` as session
// and join token, one publisher handle (joined as `sfu.participantId`, which the backend kicks when
// this device leaves the call) sending the camera and microphone, and one subscriber handle per
// other publisher, naming this publisher's `private_id` (the backend's rooms require it). Each
// remote feed gets a tile; a feed that unpublishes, leaves or is kicked loses its tile. A
// subscription that fails, or whose connection fails, is made again a second later (Janus answers
// "no such feed" once the feed is gone, and that ends it), so a feed is never left as a dead tile.
// ICE is gathered completely before each SDP goes out (no trickle).
//
// The media session is renewed by the client package's MediaSessionKeeper (app.js): `renew()`
// takes each new one, and its token goes on every later request of this Janus session
// (keepalives included), so the session lasts as long as the call; its ICE servers go to the
// peer connections for any later ICE gathering. A lost SFU connection (Janus restarted or
// unreachable, or the session gone) is reported once through `onLost`: app.js then asks for a
// new media session and starts a new GroupMedia. `onState` gets the media's real state:
// `connecting`, `connected` only while the publisher's connection is up and every remote feed's
// inbound RTP grows, `stalled` when a feed's does not, `reconnecting` after a loss.

/** Janus VideoRoom's error code for a feed that is not (or no longer) in the room. */
const NO_SUCH_FEED = 428;

export class GroupMedia {
  /**
   * @param {object} o
   * @param {{ url: string, room: number, token: string, participantId: number }} o.sfu
   * @param {RTCIceServer[]} o.iceServers
   * @param {boolean} o.relayOnly
   * @param {boolean} o.video
   * @param {string} o.display            what the others' tiles say (this page's userId)
   * @param {HTMLElement} o.tiles         where the remote tiles go
   * @param {HTMLVideoElement} o.localVideo
   * @param {(display: string) => string} o.label   a tile's label, from the participants list
   * @param {(state: string) => void} o.onState     the media's state (see above)
   * @param {(err: Error) => void} o.onError
   * @param {(why: string) => void} o.onLost        the SFU connection is gone: reconnect with a new session
   */
  constructor(o) {
    this.o = o;
    this.ws = undefined;
    this.session = undefined;
    this.n = 0;
    this.waiting = new Map();
    /** feed id → { pc, handle, tile }: its peer connection, its Janus subscriber handle, its tile */
    this.feeds = new Map();
    this.pcs = [];
    this.stream = undefined;
    this.privateId = undefined;
    this.closed = false;
    this.lost = false;
    /** feed id → inbound RTP bytes at the last look */
    this.bytes = new Map();
  }

  /** The current token: the latest media session's (renewed by app.js). */
  get token() {
    return this.o.sfu.token;
  }

  /** Takes a renewed media session: its token for every later request, its ICE servers for later gathering. */
  renew(session) {
    if (session.sfu?.room !== this.o.sfu.room || session.sfu?.url !== this.o.sfu.url) return this.loseSfu('the call moved to another SFU room');
    this.o.sfu = session.sfu;
    this.o.iceServers = session.iceServers;
    for (const pc of this.pcs) if (pc.signalingState !== 'closed') pc.setConfiguration({ ...pc.getConfiguration(), iceServers: session.iceServers });
  }

  /** Once: the SFU connection is gone (closed socket, refused keepalive); app.js reconnects. */
  loseSfu(why) {
    if (this.closed || this.lost) return;
    this.lost = true;
    this.o.onState('reconnecting');
    this.o.onLost(why);
  }

  /** The real state, every 2 s: the publisher's connection, and whether each remote feed's inbound RTP grows. */
  async look() {
    if (this.closed || this.lost) return;
    const pub = this.publisherPc?.connectionState ?? 'connecting';
    if (pub !== 'connected') return this.o.onState(pub);
    let stalled = 0;
    for (const [feed, { pc }] of this.feeds) {
      let bytes = 0;
      if (pc) for (const r of (await pc.getStats()).values()) if (r.type === 'inbound-rtp') bytes += r.bytesReceived ?? 0;
      // A feed seen for the first time has nothing to compare with yet.
      if (this.bytes.has(feed) && bytes <= this.bytes.get(feed)) stalled++;
      this.bytes.set(feed, bytes);
    }
    if (!this.closed && !this.lost) this.o.onState(stalled > 0 ? 'stalled' : 'connected');
  }

  async start() {
    const { sfu, video, localVideo } = this.o;
    this.ws = new WebSocket(sfu.url, 'janus-protocol');
    await new Promise((res, rej) => {
      this.ws.onopen = res;
      this.ws.onerror = () => rej(new Error(`cannot reach the SFU at ${sfu.url}`));
    });
    this.ws.onmessage = (e) => this.onMessage(JSON.parse(e.data));
    this.ws.onclose = () => this.loseSfu('the SFU connection closed');
    this.session = (await this.send({ janus: 'create' })).data.id;
    // Each keepalive carries the latest token; a refused one (an expired token, a session Janus
    // no longer has) means the session is gone.
    this.keepalive = setInterval(() => this.send({ janus: 'keepalive' }).catch((err) => this.loseSfu(err.message)), 15_000);
    this.looking = setInterval(() => this.look().catch(() => undefined), 2_000);
    this.publisher = await this.attach();
    const joined = await this.message(this.publisher, { request: 'join', ptype: 'publisher', room: sfu.room, token: this.token, id: sfu.participantId, display: this.o.display });
    this.privateId = joined.plugindata.data.private_id;
    this.stream = await navigator.mediaDevices.getUserMedia({ audio: true, video: video ? { width: 640, height: 360 } : false });
    if (this.closed) return this.close();
    localVideo.srcObject = this.stream;
    const pc = (this.publisherPc = this.newPc());
    pc.onconnectionstatechange = () => this.look().catch(() => undefined);
    for (const track of this.stream.getTracks()) pc.addTrack(track, this.stream);
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    const configured = await this.message(this.publisher, { request: 'configure', audio: true, video }, pc.localDescription.toJSON());
    await pc.setRemoteDescription(configured.jsep);
    this.subscribeAll(joined);
  }

  onMessage(m) {
    if (m.janus === 'keepalive') return;
    const wait = m.transaction && this.waiting.get(m.transaction);
    if (wait) {
      // A message's `ack` comes before its answer; a keepalive's is its answer.
      if (m.janus === 'ack' && !m.transaction.startsWith('k')) return;
      this.waiting.delete(m.transaction);
      return wait(m);
    }
    if (m.janus === 'ack') return;
    if (m.janus === 'timeout') return this.loseSfu('the SFU session timed out');
    const data = m.plugindata?.data ?? {};
    this.subscribeAll(m);
    for (const key of ['unpublished', 'leaving', 'kicked']) if (typeof data[key] === 'number') this.drop(data[key]);
  }

  send(msg) {
    return new Promise((res, rej) => {
      if (this.ws.readyState !== WebSocket.OPEN) return rej(new Error('SFU: not connected'));
      const transaction = `${msg.janus === 'keepalive' ? 'k' : 't'}${++this.n}`;
      this.waiting.set(transaction, (m) => (m.janus === 'error' ? rej(new Error(`SFU: ${m.error?.reason ?? m.error?.code}`)) : res(m)));
      this.ws.send(JSON.stringify({ ...msg, transaction, token: this.token, ...(this.session ? { session_id: this.session } : {}) }));
    });
  }

  async attach() {
    return (await this.send({ janus: 'attach', plugin: 'janus.plugin.videoroom' })).data.id;
  }

  async message(handle, body, jsep) {
    const m = await this.send({ janus: 'message', handle_id: handle, body, ...(jsep ? { jsep } : {}) });
    const data = m.plugindata?.data ?? {};
    if (data.error_code) throw Object.assign(new Error(`SFU: ${data.error}`), { code: data.error_code });
    return m;
  }

  newPc() {
    const pc = new RTCPeerConnection({ iceServers: this.o.iceServers, iceTransportPolicy: this.o.relayOnly ? 'relay' : 'all' });
    this.pcs.push(pc);
    return pc;
  }

  subscribeAll(m) {
    for (const p of m.plugindata?.data?.publishers ?? []) this.subscribe(p.id, p.display);
  }

  /** Subscribes to a remote feed; one that fails is subscribed to again (see above). */
  async subscribe(feed, display) {
    if (this.closed || this.feeds.has(feed) || feed === this.o.sfu.participantId) return;
    const entry = { pc: undefined, handle: undefined, tile: undefined };
    this.feeds.set(feed, entry);
    await this.subscribeOnce(feed, display, entry).catch((err) => this.resubscribe(feed, display, entry, err));
  }

  /** Unless the feed left meanwhile (its entry is gone) or is gone from the room, subscribes again a second later. */
  resubscribe(feed, display, entry, err) {
    if (this.closed || this.lost || this.feeds.get(feed) !== entry) return;
    this.drop(feed);
    if (err.code !== NO_SUCH_FEED) setTimeout(() => this.subscribe(feed, display), 1000);
  }

  /** One subscriber handle and one tile for a remote feed. */
  async subscribeOnce(feed, display, entry) {
    const tile = document.createElement('figure');
    tile.className = 'tile';
    tile.dataset.feed = String(feed);
    tile.dataset.userId = display ?? '';
    const v = document.createElement('video');
    v.autoplay = true;
    v.playsInline = true;
    const caption = document.createElement('figcaption');
    caption.textContent = this.o.label(display ?? '');
    tile.append(v, caption);
    entry.tile = tile;
    this.o.tiles.append(tile);
    const handle = (entry.handle = await this.attach());
    const joined = await this.message(handle, { request: 'join', ptype: 'subscriber', room: this.o.sfu.room, token: this.token, private_id: this.privateId, streams: [{ feed }] });
    if (this.feeds.get(feed) !== entry) return;
    const pc = (entry.pc = this.newPc());
    pc.ontrack = (e) => {
      if (v.srcObject !== e.streams[0]) v.srcObject = e.streams[0] ?? new MediaStream([e.track]);
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === 'failed') this.resubscribe(feed, display, entry, new Error("SFU: the feed's connection failed"));
    };
    await pc.setRemoteDescription(joined.jsep);
    await pc.setLocalDescription(await pc.createAnswer());
    await gathered(pc);
    await this.message(handle, { request: 'start', room: this.o.sfu.room }, pc.localDescription.toJSON());
  }

  /** A feed left the room (unpublished, left, kicked), or its subscription is made again: its tile and handle go. */
  drop(feed) {
    const entry = this.feeds.get(feed);
    if (!entry) return;
    this.feeds.delete(feed);
    this.bytes.delete(feed);
    if (entry.pc) {
      entry.pc.close();
      this.pcs = this.pcs.filter((pc) => pc !== entry.pc);
    }
    entry.tile?.remove();
    if (entry.handle !== undefined && !this.closed && this.ws?.readyState === WebSocket.OPEN) this.send({ janus: 'detach', handle_id: entry.handle }).catch(() => undefined);
  }

  /** Relabels the tiles (the participants list changed). */
  relabel() {
    for (const { tile } of this.feeds.values()) tile.querySelector('figcaption').textContent = this.o.label(tile.dataset.userId);
  }

  /** Leaves the room: closing the Janus session ends its handles; the backend's kick follows the leave. */
  close() {
    this.closed = true;
    clearInterval(this.keepalive);
    clearInterval(this.looking);
    if (this.ws) this.ws.onclose = null;
    for (const feed of [...this.feeds.keys()]) this.drop(feed);
    for (const pc of this.pcs) pc.close();
    for (const t of this.stream?.getTracks() ?? []) t.stop();
    this.o.localVideo.srcObject = null;
    if (this.ws?.readyState === WebSocket.OPEN && this.session) this.ws.send(JSON.stringify({ janus: 'destroy', session_id: this.session, transaction: `d${++this.n}`, token: this.token }));
    this.ws?.close();
  }
}

function gathered(pc) {
  return new Promise((res) => {
    if (pc.iceGatheringState === 'complete') return res();
    pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && res());
  });
}
