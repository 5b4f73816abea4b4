// One call's WebRTC connection, negotiated with in-call messages (README "In-call messages"):
// the caller sends the offer once the call is accepted, the callee answers it, both trickle ICE
// candidates. ICE servers come from POST /v1/calls/{id}/media-session, renewed by the client
// package's MediaSessionKeeper (app.js) and applied with setConfiguration. An ICE restart (the
// connection failed, or `restartIce()`) first fetches a new media session: coturn keeps an
// existing allocation past its credential's lifetime but refuses a new one with it. The caller
// restarts (a new offer with new ICE credentials); a callee whose connection failed asks it to.

export class MediaCall {
  /**
   * @param {object} o
   * @param {'caller'|'callee'} o.role
   * @param {RTCIceServer[]} o.iceServers
   * @param {boolean} o.relayOnly   iceTransportPolicy 'relay': media only through the TURN server
   * @param {boolean} o.video
   * @param {(payload: object) => Promise<unknown>} o.send   sends an in-call message
   * @param {(state: string) => void} o.onState             RTCPeerConnection connectionState
   * @param {() => Promise<RTCIceServer[]>} o.refreshIceServers  a new media session's ICE servers (before an ICE restart)
   * @param {HTMLVideoElement} o.localVideo
   * @param {HTMLVideoElement} o.remoteVideo
   */
  constructor(o) {
    this.o = o;
    this.pc = undefined;
    this.stream = undefined;
    this.pendingCandidates = [];
    this.queue = [];
    this.ready = false;
    this.closed = false;
    // Messages are applied one at a time, in arrival order.
    this.chain = Promise.resolve();
  }

  /** Takes one message from the other side (one sender's messages arrive in seq order). */
  deliver(payload) {
    this.chain = this.chain
      .then(() => (this.ready ? this.handle(payload) : this.queue.push(payload)))
      .catch((err) => this.o.onError?.(err));
    return this.chain;
  }

  async start() {
    const { role, iceServers, relayOnly, video, send, onState, localVideo, remoteVideo } = this.o;
    this.stream = await navigator.mediaDevices.getUserMedia({ audio: true, video: video ? { width: 640, height: 360 } : false });
    if (this.closed) return this.stopTracks();
    localVideo.srcObject = this.stream;
    const pc = new RTCPeerConnection({ iceServers, iceTransportPolicy: relayOnly ? 'relay' : 'all' });
    this.pc = pc;
    for (const track of this.stream.getTracks()) pc.addTrack(track, this.stream);
    pc.onicecandidate = (e) => {
      if (e.candidate) send({ kind: 'candidate', candidate: e.candidate.toJSON() }).catch(() => {});
    };
    pc.ontrack = (e) => {
      if (remoteVideo.srcObject !== e.streams[0]) remoteVideo.srcObject = e.streams[0];
    };
    pc.onconnectionstatechange = () => {
      onState(pc.connectionState);
      if (pc.connectionState === 'failed') this.restartIce().catch((err) => this.o.onError?.(err));
    };
    onState(pc.connectionState);
    if (role === 'caller') {
      await pc.setLocalDescription(await pc.createOffer());
      await send({ kind: 'offer', sdp: pc.localDescription.sdp });
    }
    // Messages that arrived before the connection existed, then the rest as they come.
    this.chain = this.chain.then(async () => {
      this.ready = true;
      for (const payload of this.queue.splice(0)) await this.handle(payload);
    });
    await this.chain;
  }

  /** Takes a renewed media session's ICE servers: any later gathering (an ICE restart) uses them. */
  setIceServers(iceServers) {
    this.o.iceServers = iceServers;
    if (this.pc && this.pc.signalingState !== 'closed') this.pc.setConfiguration({ ...this.pc.getConfiguration(), iceServers });
  }

  /**
   * An ICE restart with a new media session's ICE servers: the caller sends a new offer with new
   * ICE credentials; the callee asks the caller for one (and applies its own new servers first).
   */
  async restartIce() {
    if (this.closed || this.restarting) return this.restarting;
    this.restarting = (async () => {
      this.setIceServers(await this.o.refreshIceServers());
      if (this.closed) return;
      if (this.o.role === 'caller') {
        await this.pc.setLocalDescription(await this.pc.createOffer({ iceRestart: true }));
        await this.o.send({ kind: 'offer', sdp: this.pc.localDescription.sdp });
      } else await this.o.send({ kind: 'restart' });
    })().finally(() => (this.restarting = undefined));
    return this.restarting;
  }

  async handle(payload) {
    if (this.closed) return;
    const pc = this.pc;
    if (payload.kind === 'restart' && this.o.role === 'caller') return void this.restartIce().catch((err) => this.o.onError?.(err));
    if (payload.kind === 'offer' && this.o.role === 'callee') {
      await pc.setRemoteDescription({ type: 'offer', sdp: payload.sdp });
      await this.flushCandidates();
      await pc.setLocalDescription(await pc.createAnswer());
      await this.o.send({ kind: 'answer', sdp: pc.localDescription.sdp });
    } else if (payload.kind === 'answer' && this.o.role === 'caller') {
      await pc.setRemoteDescription({ type: 'answer', sdp: payload.sdp });
      await this.flushCandidates();
    } else if (payload.kind === 'candidate') {
      if (pc.remoteDescription) await pc.addIceCandidate(payload.candidate);
      else this.pendingCandidates.push(payload.candidate);
    }
  }

  async flushCandidates() {
    for (const c of this.pendingCandidates.splice(0)) await this.pc.addIceCandidate(c);
  }

  stopTracks() {
    for (const t of this.stream?.getTracks() ?? []) t.stop();
  }

  close() {
    this.closed = true;
    this.pc?.close();
    this.stopTracks();
    this.o.localVideo.srcObject = null;
    this.o.remoteVideo.srcObject = null;
  }
}
