import uWS from 'uWebSockets.js';
import { listenAndAnnounce } from './announce.js';

/**
 * The floor of a fan-out on this machine: a bare uWebSockets.js app that holds the sockets at
 * /ws and, on GET /fanout?rounds=R&bytes=B, sends R rounds of one B-byte text frame to every
 * socket it holds, one send per socket a round, as a gateway hands a live signal's copies on.
 * It answers `{"sent":N,"cpuUs":X}`: this process's CPU (user and system) over the sends, what
 * one copy costs a server with nothing else to do (bench/scenarios/compareSignals.ts). Apart from
 * uwsHello.ts, whose sockets carry no per-socket state (the floor of memory per connection).
 * Prints `{"msg":"listening","port":N}`.
 */
const app = uWS.App();
const sockets = new Set<uWS.WebSocket<unknown>>();

app.ws('/ws', {
  idleTimeout: 60,
  sendPingsAutomatically: true,
  maxPayloadLength: 4096,
  open: (ws) => void sockets.add(ws),
  close: (ws) => void sockets.delete(ws),
});

app.get('/fanout', (res, req) => {
  const q = new URLSearchParams(req.getQuery() ?? '');
  const rounds = Number(q.get('rounds') ?? 1000);
  const frame = 'x'.repeat(Number(q.get('bytes') ?? 180));
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const before = process.cpuUsage();
  let sent = 0;
  let round = 0;
  // A few rounds a turn of the event loop, so the sockets drain between them as a gateway's do.
  const turn = () => {
    for (let k = 0; k < 10 && round < rounds; k++, round++) {
      for (const ws of sockets) {
        ws.send(frame);
        sent++;
      }
    }
    if (round < rounds) return void setImmediate(turn);
    const used = process.cpuUsage(before);
    if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON.stringify({ sent, cpuUs: used.user + used.system })));
  };
  turn();
});

listenAndAnnounce(app);
