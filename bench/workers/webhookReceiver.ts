/**
 * The bench's webhook receiver (bench/scenarios/webhooks.ts): a plain HTTP server that answers
 * every POST with 204 (MODE=ok) or never answers (MODE=hang), and counts what it got. It does not
 * verify signatures (the tests do that); it costs as little as a receiver can.
 * Prints `{"msg":"listening","port":N}`; GET /count answers `{ "received": n }`.
 */
import { createServer } from 'node:http';

const hang = process.env.MODE === 'hang';
let received = 0;
const server = createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ received }));
    return;
  }
  req.resume();
  req.on('end', () => {
    received++;
    if (!hang) res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
