import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

/**
 * The client's address: the peer address, or, behind a proxy that sets it (CLIENT_IP_HEADER),
 * the first address of that header. Call synchronously inside the uWS callback.
 */
export function clientAddress(res: HttpResponse, req: HttpRequest, header: string | undefined): string {
  if (header) {
    const first = req.getHeader(header).split(',')[0]?.trim();
    if (first) return first;
  }
  return Buffer.from(res.getRemoteAddressAsText()).toString();
}
