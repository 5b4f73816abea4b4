import uWS from 'uWebSockets.js';

/**
 * Listens on a free loopback port and prints `{"msg":"listening","port":N}`, the line the bench
 * waits for (bench/lib/processes.ts startHelper); exits on SIGTERM.
 */
export function listenAndAnnounce(app: uWS.TemplatedApp): void {
  app.listen('127.0.0.1', 0, (sock) => {
    if (!sock) {
      process.stderr.write('cannot listen\n');
      process.exit(1);
    }
    process.stdout.write(`${JSON.stringify({ msg: 'listening', port: uWS.us_socket_local_port(sock) })}\n`);
  });
  process.on('SIGTERM', () => process.exit(0));
}
