import uWS from 'uWebSockets.js';
import { listenAndAnnounce } from './announce.js';

/**
 * The raw uWebSockets.js ceiling: the smallest useful app on the same library and machine. HTTP:
 * reads the request body and answers a tiny JSON (what the API does minus auth, validation and
 * Redis). WebSocket at /ws: accepts and holds sockets with no per-socket state (the floor of
 * memory per connection). Prints `{"msg":"listening","port":N}`.
 */
const app = uWS.App();
const reply = '{"ok":true}';

app.post('/*', (res) => {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  res.onData((_chunk, isLast) => {
    if (!isLast || aborted) return;
    res.cork(() => {
      res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(reply);
    });
  });
});
app.get('/*', (res) => {
  res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(reply));
});
app.ws('/ws', { idleTimeout: 60, sendPingsAutomatically: true, maxPayloadLength: 4096 });

listenAndAnnounce(app);
