// The softphone page (README "Browser softphone"): sign in, call a user by ID, ring with
// answer/decline, WebRTC media negotiated over in-call messages, end reasons from each side, and
// a signaling socket that resumes by cursor. Group calls (docs/group-calls.md): ring several
// users, join, invite more, leave or end for all, with each member's state; their media through
// the SFU the server names (Janus: groupMedia.js, a tile per remote participant).
import { Api, ProblemError, Signaling } from './api.js';
import { MediaCall } from './media.js';
import { GROUP_END_TEXT, Members, renderMembers, userIdsOf } from './group.js';
import { GroupMedia } from './groupMedia.js';
import { MediaSessionKeeper, MediaSessionStoppedError } from './mediaSession.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

const state = {
  session: undefined,
  api: undefined,
  signaling: undefined,
  /** The call on screen: { id, role, peer, video, status, media, lastSeq, sends } */
  call: undefined,
  /** In-call messages that arrived before their call's media started, by callId. */
  early: new Map(),
  /** Events of a call not on screen yet (they may overtake the reply that puts it there), by callId. */
  ahead: new Map(),
};

// For people poking at it from the console (and the browser tests): the current connection.
window.softphone = {
  state,
  get pc() {
    return state.call?.media?.pc;
  },
};

// ---------------------------------------------------------------- sign-in

async function init() {
  $('relay-only').checked = params.get('relay') === '1';
  if (params.get('user')) $('signin-user').value = params.get('user');
  // The form is taken over at once: a click before the configuration has arrived waits for it,
  // instead of submitting the form and reloading the page (which lost the sign-in).
  const configured = fetch('/demo-api/config').then((r) => r.json());
  configured.catch(() => undefined); // reported where it is awaited (init's caller, the form)
  $('signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    configured.then((config) => signIn(config.devTokens)).catch((err) => ($('signin-error').textContent = err.message));
  });
  const saved = sessionStorage.getItem('softphone.session');
  if (saved) return start(JSON.parse(saved));
  const config = await configured;
  if (!config.devTokens) {
    // Not in dev mode: sign in with a session token minted elsewhere (npm run token).
    $('signin-hint').textContent = 'Paste a session token (npm run token -- --sub alice --iid alice-web).';
    $('signin-token-row').hidden = false;
    $('signin-user').required = false;
    $('signin-user').closest('label').hidden = true;
    $('signin-name').closest('label').hidden = true;
  }
}

async function signIn(devTokens) {
  $('signin-error').textContent = '';
  if (!devTokens) {
    const token = $('signin-token').value.trim();
    const claims = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    return start({ token, userId: claims.sub, installationId: claims.iid, name: claims.name || claims.sub });
  }
  const userId = $('signin-user').value.trim();
  const name = $('signin-name').value.trim() || userId;
  // One installation per browser tab: a second tab of the same user is another device.
  const installationId = `${userId}-web-${crypto.randomUUID().slice(0, 6)}`;
  const res = await fetch('/demo-api/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ userId, name, installationId }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(body.detail || `sign-in failed (${res.status})`);
  start({ token: body.token, userId, installationId, name });
}

function start(session) {
  state.session = session;
  sessionStorage.setItem('softphone.session', JSON.stringify(session));
  state.api = new Api(session.token);
  $('signin').hidden = true;
  $('phone').hidden = false;
  $('who').hidden = false;
  $('who-name').textContent = session.name;
  $('who-iid').textContent = session.installationId;
  $('who-avatar').textContent = initial(session.name);
  state.signaling = new Signaling({
    token: session.token,
    installationKey: session.installationId,
    onEvent,
    onMessage,
    onSignal,
    onStatus,
    onGap: (reason) => log('gap', `events lost (${reason}); continuing from the head`, 'sys'),
    onSynced,
  });
  state.api.signaling = state.signaling;
  state.signaling.connect();
  state.api.callPolicy().then((p) => ($('dnd-toggle').checked = p.doNotDisturb.on), showError);
  render();
}

/** Do not disturb (docs/call-policy.md): the box shows what the server holds after each change. */
async function toggleDoNotDisturb() {
  const box = $('dnd-toggle');
  try {
    const p = await state.api.setDoNotDisturb(box.checked);
    box.checked = p.doNotDisturb.on;
    log('policy', `do not disturb ${p.doNotDisturb.on ? 'on' : 'off'}`, 'sys');
  } catch (err) {
    box.checked = !box.checked;
    showError(err);
  }
}

function signOut() {
  state.signaling?.stop();
  if (state.call && !isOver(state.call)) hangUp();
  sessionStorage.removeItem('softphone.session');
  location.reload();
}

// ---------------------------------------------------------------- signaling

function onStatus(status, resumedFrom, code) {
  // Messages that arrive while the socket is away are fetched after the reconnect from the last
  // seq seen before it went away (a live message may arrive before the fetch does).
  const call = state.call;
  if (call && status !== 'online') call.recoverAfter = Math.min(call.recoverAfter ?? Infinity, call.lastSeq);
  $('conn-status').dataset.state = status;
  $('conn-status').textContent = status;
  if (status === 'connecting') log('connecting', resumedFrom ? `resuming after cursor ${short(resumedFrom)}` : 'from the head of the log', 'sys');
  if (status === 'offline') log('disconnected', code ? `close code ${code}` : '', 'sys');
}

async function onSynced({ resumedFrom, replayed, again }) {
  $('cursor').textContent = state.signaling.cursor ?? '—';
  log('online', resumedFrom ? `resumed by cursor, ${replayed} event(s) replayed` : `registered as ${state.session.installationId}`, 'sys');
  // Messages are not in the event log: after a reconnect during a call, fetch what was missed.
  const call = state.call;
  if ((resumedFrom || again) && call && !isOver(call) && !call.group) {
    const after = call.recoverAfter ?? call.lastSeq;
    call.recoverAfter = undefined;
    try {
      const { messages } = await state.api.messagesAfter(call.id, after);
      if (messages.length) log('recovered', `${messages.length} in-call message(s) after seq ${after}`, 'sys');
      for (const m of messages) {
        if (state.signaling.seen.has(m.eventId)) continue;
        state.signaling.seen.add(m.eventId);
        onMessage(m);
      }
    } catch (err) {
      showError(err);
    }
  }
}

function onEvent(e) {
  $('cursor').textContent = state.signaling.cursor ?? '—';
  log(e.type, describeEvent(e));
  handleEvent(e);
}

function handleEvent(e) {
  const call = state.call;
  if (e.type !== 'call.invited' && call?.id !== e.callId) {
    keepAhead(e);
    return;
  }
  switch (e.type) {
    case 'call.invited':
      if (e.expiresAtMs <= Date.now()) return; // a replayed invitation that has rung out
      if (call && !isOver(call) && call.id !== e.callId) return; // busy with another call
      // The same call again: only a group call rings a member again (a late invite after it left or declined).
      if (call?.id === e.callId && !(isOver(call) && call.group)) return;
      state.call = newCall(e.callId, 'callee', e.displayName, e.video, 'incoming');
      // README "Caller identity and call back": the handle is <scheme>:<percent-encoded userId>.
      state.call.peerUserId = decodeURIComponent(e.handle.slice(e.handle.indexOf(':') + 1));
      render();
      ringingReceipt(state.call);
      return;
    case 'call.ringing':
      call.rung = true; // the caller's page says "Ringing…" instead of "Calling…"
      call.members.applyEvent(e);
      render();
      return;
    case 'call.participant':
      call.group = true;
      call.members.applyEvent(e);
      if (call.status === 'outgoing' && call.members.joinedBesides(state.session.userId) > 0) inCall(call);
      call.groupMedia?.relabel();
      render();
      return;
    case 'call.accepted':
      if (call.role === 'caller' && call.status === 'outgoing') {
        call.status = 'connecting';
        render();
        startMedia(call);
      }
      return;
    case 'call.ended':
      if (call.group) call.members.endAll(BigInt(e.revision));
      if (!isOver(call)) finish(call, e.reason);
      return;
    case 'call.renamed':
      call.peer = e.displayName;
      render();
      return;
    case 'call.moved':
      // The other party goes on from another installation (docs/protocol.md "Moving a call"): a
      // new peer connection with it; messages from the installation it left are dropped.
      call.peerInstallationId = e.installationId;
      if (!call.group && call.media) restartMedia(call);
      return;
  }
}

function keepAhead(e) {
  const list = state.ahead.get(e.callId) ?? [];
  list.push(e);
  state.ahead.set(e.callId, list);
  if (state.ahead.size > 20) state.ahead.delete(state.ahead.keys().next().value);
}

/** Puts a call this page placed on screen, with the events of it that came before the reply. */
function onScreen(call) {
  state.call = call;
  const ahead = state.ahead.get(call.id) ?? [];
  state.ahead.delete(call.id);
  for (const e of ahead) handleEvent(e);
}

/** Another member's live signal (docs/signaling.md "Live signals"): the members list shows it. */
function onSignal(sig) {
  const call = state.call;
  if (!call?.group || call.id !== sig.callId) return;
  call.members.applySignal(sig);
  render();
}

function onMessage(m) {
  const call = state.call;
  log('call.message', `#${m.seq} ${m.payload.kind ?? 'message'} from ${m.fromInstallationId}`);
  if (call?.id === m.callId) call.lastSeq = Math.max(call.lastSeq, m.seq);
  if (call?.id === m.callId && call.peerInstallationId && m.fromInstallationId !== call.peerInstallationId) return;
  if (call?.id === m.callId && call.media) {
    call.media.deliver(m.payload);
    return;
  }
  // Before the media exists (an early offer, or a message that overtook call.accepted).
  const list = state.early.get(m.callId) ?? [];
  list.push(m);
  state.early.set(m.callId, list);
  if (state.early.size > 20) state.early.delete(state.early.keys().next().value);
}

// ---------------------------------------------------------------- calls

function newCall(id, role, peer, video, status) {
  return { id, role, peer, video, status, media: undefined, lastSeq: 0, sends: Promise.resolve(), endReason: undefined, group: false, members: new Members() };
}

/** A group call's snapshot: the call is a group call, with these members. */
function applyGroup(call, snapshot) {
  if (!snapshot.participants) return;
  call.group = true;
  call.title = snapshot.title;
  call.callerUserId = snapshot.caller.userId;
  call.callerName = snapshot.caller.displayName;
  call.members.applySnapshot(snapshot);
  if (snapshot.presence) call.members.applyPresence(snapshot.presence);
}

/** A group call: in the call once joined (the caller: once someone else joined); its media through the SFU. */
function inCall(call) {
  call.status = 'connected';
  call.everJoined = true;
  call.connectedAt = Date.now();
  startGroupMedia(call);
}

/**
 * Enters the group call's SFU room (docs/group-calls.md "Media"). Without an SFU the server
 * answers 503 sfu_unavailable and the call goes on with signaling only.
 */
async function startGroupMedia(call) {
  const note = (text) => ($('group-media-note').textContent = text);
  note('Joining the media room…');
  try {
    // The client package's keeper (demo/mediaSession.js, built from packages/client/src/media.ts):
    // it renews the media session before it expires and retries a 503 after its retry-after.
    call.mediaKeeper ??= new MediaSessionKeeper({
      client: state.api,
      callId: call.id,
      onSession: (session) => call.groupMedia?.renew(session),
      onRetry: (err, delayMs) => note(`Media server unavailable (${err.message}); trying again in ${Math.round(delayMs / 1000)} s…`),
      onStopped: (err) => !isOver(call) && log('media session', err.message, 'sys'),
    });
    const { iceServers, sfu } = call.groupMedia === undefined && call.mediaKeeper.current ? await call.mediaKeeper.refresh() : await call.mediaKeeper.start();
    if (isOver(call)) return;
    if (sfu?.kind !== 'janus') return note(`This page speaks only to Janus; the server's SFU is ${sfu?.kind ?? 'none'}: no media, signaling only.`);
    note('');
    call.groupMedia = new GroupMedia({
      sfu,
      iceServers,
      relayOnly: $('relay-only').checked,
      video: call.video,
      display: state.session.userId,
      tiles: $('tiles'),
      localVideo: $('group-local'),
      // A tile says whose it is when the participants list has that member in the call.
      label: (userId) => (call.members.byUser.get(userId)?.state === 'joined' ? userId : `${userId || '?'} (not in the list)`),
      onState: (s) => {
        $('media-state').dataset.state = s;
        $('media-state').textContent = s === 'connected' ? 'media connected' : `media ${s}`;
      },
      onError: (err) => !isOver(call) && showError(err),
      onLost: (why) => reconnectGroupMedia(call, why),
    });
    render();
    await call.groupMedia.start();
  } catch (err) {
    if (isOver(call) || err instanceof MediaSessionStoppedError) return;
    if (call.groupMedia?.lost || err.message?.startsWith('cannot reach the SFU')) {
      // The SFU went away while joining: try again with a new media session.
      return reconnectGroupMedia(call, err.message);
    }
    if (err instanceof ProblemError && err.problem.code === 'sfu_unavailable') {
      // Said once, in the note; the server's own words go to the event log.
      note("No media: no SFU for this call; the call's signaling goes on.");
      log('media-session', err.message, 'sys');
    } else showError(err);
  }
}

/**
 * The SFU connection was lost (Janus restarted or unreachable): tear the room's media down and
 * join again with a new media session (the keeper waits out the server's 503 retry-after; a
 * restarted Janus gets the call's room from that media-session). Spaced by a second, so a Janus
 * that the server reaches and the page does not is not hammered.
 */
function reconnectGroupMedia(call, why) {
  if (isOver(call) || call.reconnecting) return;
  call.reconnecting = true;
  log('media', `SFU connection lost (${why}): reconnecting`, 'sys');
  $('media-state').dataset.state = 'reconnecting';
  $('media-state').textContent = 'media reconnecting';
  call.groupMedia?.close();
  call.groupMedia = undefined;
  setTimeout(() => {
    call.reconnecting = false;
    if (!isOver(call)) startGroupMedia(call);
  }, 1000);
}

/** Tells the caller this page shows the call (docs/group-calls.md "Ringing receipts"), and learns whether it is a group call. */
async function ringingReceipt(call) {
  try {
    applyGroup(call, await state.api.ringing(call.id));
    render();
  } catch (err) {
    log('ringing receipt', err.message, 'sys');
  }
}

function isOver(call) {
  return call.status === 'ended';
}

async function placeCall(calleeUserId, video) {
  if (state.call && !isOver(state.call)) return;
  clearError();
  try {
    const snapshot = await state.api.createCall(calleeUserId, video);
    const call = newCall(snapshot.callId, 'caller', calleeUserId, video, snapshot.state === 'ended' ? 'ended' : 'outgoing');
    call.peerUserId = calleeUserId;
    onScreen(call);
    if (snapshot.state === 'ended') finish(call, snapshot.endReason);
    render();
  } catch (err) {
    showError(err);
  }
}

async function placeGroupCall(userIds, title, video) {
  if (state.call && !isOver(state.call)) return;
  clearError();
  try {
    const snapshot = await state.api.createGroupCall(userIds, title, video);
    const call = newCall(snapshot.callId, 'caller', title || 'Group call', video, snapshot.state === 'ended' ? 'ended' : 'outgoing');
    applyGroup(call, snapshot);
    onScreen(call);
    if (snapshot.state === 'ended') finish(call, snapshot.endReason);
    render();
  } catch (err) {
    showError(err);
  }
}

/** Rings more users into the group call on screen (docs/group-calls.md "Inviting more"). */
async function inviteMore(userIds) {
  const call = state.call;
  if (!call?.group || isOver(call)) return;
  clearError();
  try {
    applyGroup(call, await state.api.invite(call.id, userIds));
    $('invite-users').value = '';
    render();
  } catch (err) {
    showError(err);
  }
}

/** Blocks the ringing call's caller (docs/call-policy.md), then declines this call. */
async function blockCaller() {
  const call = state.call;
  if (!call || call.status !== 'incoming' || call.group || !call.peerUserId) return;
  try {
    await state.api.blockUser(call.peerUserId);
  } catch (err) {
    showError(err);
    return;
  }
  await endCall('declined');
}

async function answerCall() {
  const call = state.call;
  if (!call || call.status !== 'incoming') return;
  call.status = 'connecting';
  render();
  try {
    const snapshot = await state.api.answer(call.id, state.session.installationId);
    if (snapshot.participants) {
      // A group call: the page shows who is in it; its media would go through an SFU.
      applyGroup(call, snapshot);
      if (!isOver(call)) inCall(call);
      render();
      return;
    }
    startMedia(call);
  } catch (err) {
    if (err instanceof ProblemError && err.problem.snapshot) finish(call, err.problem.snapshot.endReason ?? 'answeredElsewhere');
    else showError(err);
  }
}

/**
 * Ends the call from this side with `reason`; the reason shown is the one the server stored for
 * this side. In a group call this page leaves, declines or cancels (the call may go on without
 * it), or with `forAll` the caller ends it for everyone.
 */
async function endCall(reason, forAll = false) {
  const call = state.call;
  if (!call || isOver(call)) return;
  try {
    const snapshot = await state.api.end(call.id, reason, forAll);
    applyGroup(call, snapshot);
    call.endedForAll = forAll;
    finish(call, call.group ? reason : (snapshot.endReason ?? reason));
  } catch (err) {
    showError(err);
  }
}

const hangUp = () => endCall('localHangup');

/**
 * Takes the call from this user's other installation (docs/protocol.md "Moving a call"): with the
 * revision of the snapshot just read; then this page's own media session and connection.
 */
async function moveHere() {
  const call = state.call;
  if (!call || call.group) return;
  clearError();
  try {
    const snapshot = await state.api.getCall(call.id);
    await state.api.move(call.id, state.session.installationId, snapshot.revision);
    call.status = 'connecting';
    call.endReason = undefined;
    render();
    startMedia(call);
  } catch (err) {
    showError(err);
  }
}

/** A new peer connection for the call, as at its start (the other party moved). */
function restartMedia(call) {
  call.mediaKeeper?.stop();
  call.media?.close();
  call.media = undefined;
  call.status = 'connecting';
  render();
  startMedia(call);
}

async function startMedia(call) {
  try {
    // The client package's keeper renews the media session before it expires; each new one's ICE
    // servers go to the peer connection (setConfiguration), so an ICE restart late in the call
    // gathers with credentials coturn still accepts for a new allocation.
    call.mediaKeeper = new MediaSessionKeeper({
      client: state.api,
      callId: call.id,
      onSession: (session) => call.media?.setIceServers(session.iceServers),
      onStopped: (err) => !isOver(call) && log('media session', err.message, 'sys'),
    });
    const { iceServers } = await call.mediaKeeper.start();
    if (isOver(call)) return;
    if ($('relay-only').checked && !iceServers.some((s) => s.urls.some((u) => /^turns?:/.test(u)))) {
      showError('"TURN relay only" needs a TURN server, and this server lists none (TURN_URLS): media cannot connect.');
    }
    call.media = new MediaCall({
      role: call.role,
      iceServers,
      relayOnly: $('relay-only').checked,
      video: call.video,
      // One sender's messages go out one after the other, so they keep their order (seq).
      send: (payload) => (call.sends = call.sends.then(() => state.api.sendMessage(call.id, payload))),
      onState: (s) => {
        $('media-state').dataset.state = s;
        $('media-state').textContent = s === 'connected' ? 'media connected' : `media ${s}`;
        if (s === 'failed') showError('The media connection failed (no route between the two browsers, or the TURN server refused the credentials).');
        if (s === 'connected' && call.status === 'connecting') {
          call.status = 'connected';
          call.connectedAt = Date.now();
          render();
        }
      },
      onError: showError,
      // Before an ICE restart (the connection failed, e.g. after a network change): a new media session first.
      refreshIceServers: async () => (await call.mediaKeeper.refresh()).iceServers,
      localVideo: $('local-video'),
      remoteVideo: $('remote-video'),
    });
    for (const m of state.early.get(call.id) ?? []) call.media.deliver(m.payload);
    state.early.delete(call.id);
    $('local-video').classList.add('on');
    await call.media.start();
  } catch (err) {
    if (!(err instanceof MediaSessionStoppedError)) showError(err);
  }
}

function finish(call, reason) {
  call.mediaKeeper?.stop();
  call.mediaKeeper = undefined;
  call.status = 'ended';
  call.endReason = reason;
  call.media?.close();
  call.media = undefined;
  call.groupMedia?.close();
  call.groupMedia = undefined;
  $('local-video').classList.remove('on');
  render();
}

// ---------------------------------------------------------------- rendering

const END_TEXT = {
  localHangup: () => 'You ended the call',
  remoteEnded: (c) => `${c.peer} hung up`,
  declined: (c) => (c.role === 'caller' ? `${c.peer} declined` : 'You declined'),
  callerCancelled: (c) => `${c.peer} cancelled the call`,
  unanswered: (c) => (c.role === 'caller' ? 'No answer' : 'Missed call'),
  answeredElsewhere: () => 'Answered on another device',
  movedElsewhere: () => 'Moved to another device',
  busy: (c) => `${c.peer} is busy`,
  failed: () => 'The call failed',
};

const STATE_TEXT = {
  idle: 'Ready',
  outgoing: 'Calling…',
  rung: 'Ringing…',
  incoming: 'Incoming call',
  connecting: 'Connecting…',
  connected: 'In call',
  ended: 'Call ended',
};

/**
 * What the call is called on screen. A group call's invitation carries its title as
 * `displayName` (docs/group-calls.md "Creating one"): once the snapshot says it is a group call,
 * the title is shown as the title and the caller by name, not the title as if it were the caller.
 */
function callTitle(call) {
  if (!call.group) return call.role === 'caller' ? `to ${call.peer}` : `from ${call.peer}`;
  const title = call.title ? `“${call.title}”` : 'Untitled';
  return call.role === 'caller' ? title : `${title}, from ${call.callerName ?? call.peer}`;
}

function render() {
  const call = state.call;
  const status = call?.status ?? 'idle';
  $('call-state').dataset.state = status;
  $('call-state').textContent = STATE_TEXT[status === 'outgoing' && call.rung ? 'rung' : status];
  const kind = `${call?.group ? ' · group call' : ''}${call?.video ? ' · video' : ' · audio'}`;
  $('call-peer').textContent = !call ? 'Nobody on the line' : `${callTitle(call)}${kind}`;
  $('peer-avatar').textContent = call ? initial(call.group ? call.title || call.peer : call.peer) : '☎';
  $('videos').hidden = !!call?.group;
  $('videos').classList.toggle('live', status === 'connected');
  $('videos').classList.toggle('ringing', status === 'incoming' || status === 'outgoing');
  $('answer-btn').hidden = status !== 'incoming';
  $('decline-btn').hidden = status !== 'incoming';
  $('block-btn').hidden = status !== 'incoming' || !!call.group || !call.peerUserId;
  $('cancel-btn').hidden = status !== 'outgoing';
  $('hangup-btn').hidden = status !== 'connecting' && status !== 'connected';
  $('hangup-btn').textContent = call?.group ? 'Leave' : 'Hang up';
  $('end-all-btn').hidden = !call?.group || call.role !== 'caller' || status !== 'connected';
  $('call-btn').disabled = !!call && !isOver(call);
  $('group-call-btn').disabled = !!call && !isOver(call);
  $('callback-btn').hidden = status !== 'ended' || !call.peerUserId || call.group;
  // A call this user took on another installation can move here while it goes on.
  $('move-btn').hidden = status !== 'ended' || call.group || (call.endReason !== 'answeredElsewhere' && call.endReason !== 'movedElsewhere');
  $('members').hidden = !call?.group;
  $('tiles').hidden = !call?.groupMedia;
  $('invite-form').hidden = !call?.group || (status !== 'connected' && !(status === 'outgoing' && call.role === 'caller'));
  if (call?.group) renderMembers($('participants'), call, state.session.userId);
  $('signal-btns').hidden = !call?.group || status !== 'connected';
  const mine = call?.members.presence.get(state.session.userId) ?? {};
  $('mute-btn').setAttribute('aria-pressed', String(!!mine.muted));
  $('mute-btn').textContent = mine.muted ? 'Unmute' : 'Mute';
  $('hand-btn').setAttribute('aria-pressed', String(!!mine.handRaised));
  $('hand-btn').textContent = mine.handRaised ? 'Lower hand' : 'Raise hand';
  $('call-timer').textContent = '';
  const reason = $('end-reason');
  reason.hidden = status !== 'ended';
  reason.dataset.reason = call?.endReason ?? '';
  if (status === 'ended') {
    const text = (call.group ? GROUP_END_TEXT : END_TEXT)[call.endReason] ?? (() => 'Call ended');
    reason.replaceChildren(document.createTextNode(text(call)));
    const code = document.createElement('code');
    code.textContent = call.endReason ?? '';
    reason.append(code);
  }
  if ((status !== 'connecting' && status !== 'connected') || (call.group && !call.groupMedia)) {
    $('media-state').dataset.state = 'none';
    $('media-state').textContent = 'no media';
  }
}

function log(kind, detail, cls = '') {
  const li = document.createElement('li');
  if (cls) li.className = cls;
  const time = document.createElement('time');
  time.textContent = new Date().toLocaleTimeString([], { hour12: false });
  const body = document.createElement('div');
  const k = document.createElement('span');
  k.className = 'kind';
  k.textContent = kind;
  const small = document.createElement('small');
  small.textContent = detail;
  body.append(k, small);
  li.append(time, body);
  $('events').prepend(li);
  while ($('events').children.length > 200) $('events').lastChild.remove();
}

function describeEvent(e) {
  switch (e.type) {
    case 'call.invited':
      return `${e.displayName} is calling${e.video ? ' (video)' : ''}`;
    case 'call.accepted':
      return `answered on ${e.answeredByInstallationId}`;
    case 'call.ended':
      return `reason ${e.reason}`;
    case 'call.renamed':
      return `now "${e.displayName}"`;
    case 'call.ringing':
      return `${e.userId}'s phone rings`;
    case 'call.participant':
      return `${e.userId} ${e.state}${e.installationId ? ` on ${e.installationId}` : ''}`;
    case 'call.moved':
      return `${e.userId} moved it to ${e.installationId}`;
    default:
      return '';
  }
}

function showError(err) {
  $('call-error').textContent = err instanceof Error ? err.message : String(err);
}
function clearError() {
  $('call-error').textContent = '';
}
function initial(name) {
  return (name || '?').trim().charAt(0).toUpperCase() || '?';
}
function short(cursor) {
  return cursor.length > 18 ? `…${cursor.slice(-14)}` : cursor;
}

// ---------------------------------------------------------------- wiring

$('dial-form').addEventListener('submit', (e) => {
  e.preventDefault();
  placeCall($('callee').value.trim(), $('video').checked);
});
$('group-form').addEventListener('submit', (e) => {
  e.preventDefault();
  placeGroupCall(userIdsOf($('group-users').value), $('group-title').value.trim(), $('video').checked);
});
/** Toggles this member's own live state: shown here at once, sent to the others as a signal. */
function toggleSignal(kind) {
  const call = state.call;
  if (!call?.group) return;
  const me = state.session.userId;
  const value = !call.members.presence.get(me)?.[kind];
  call.members.applySignal({ userId: me, kind, value });
  state.signaling.signal(call.id, kind, value);
  render();
}
$('mute-btn').addEventListener('click', () => toggleSignal('muted'));
$('hand-btn').addEventListener('click', () => toggleSignal('handRaised'));

$('invite-form').addEventListener('submit', (e) => {
  e.preventDefault();
  inviteMore(userIdsOf($('invite-users').value));
});
$('end-all-btn').addEventListener('click', () => endCall('localHangup', true));
$('answer-btn').addEventListener('click', answerCall);
$('decline-btn').addEventListener('click', () => endCall('declined'));
$('block-btn').addEventListener('click', blockCaller);
$('dnd-toggle').addEventListener('change', toggleDoNotDisturb);
$('cancel-btn').addEventListener('click', hangUp);
$('hangup-btn').addEventListener('click', hangUp);
$('reconnect-btn').addEventListener('click', () => state.signaling?.reconnect());
$('move-btn').addEventListener('click', moveHere);
$('callback-btn').addEventListener('click', () => placeCall(state.call.peerUserId, state.call.video));
// The duration of the call in progress.
setInterval(() => {
  const call = state.call;
  if (call?.status !== 'connected' || !call.connectedAt) return;
  const s = Math.floor((Date.now() - call.connectedAt) / 1000);
  $('call-timer').textContent = `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
}, 500);
$('signout-btn').addEventListener('click', signOut);
init().catch(showError);
