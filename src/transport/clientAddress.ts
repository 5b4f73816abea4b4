import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { ClientAddress } from '../auth/guard.js';

/**
 * The client's address: the peer address, or, behind a proxy that sets it (CLIENT_IP_HEADER),
 * the first address of that header. Call synchronously inside the uWS callback (the header is read
 * then); the peer address is read only when first asked for, because uWS asks the kernel for it
 * (a `getpeername` call) every time and only the failed-authentication limit needs it (docs/api.md
 * "Abuse limits"). `gone` says when the response was aborted or answered: uWS forbids touching it
 * then, and the address is unknown.
 */
export function clientAddress(res: HttpResponse, req: HttpRequest, header: string | undefined, gone: () => boolean): ClientAddress {
  let address = header ? req.getHeader(header).split(',')[0]?.trim() || undefined : undefined;
  return () => {
    if (address === undefined && !gone()) address = Buffer.from(res.getRemoteAddressAsText()).toString();
    return address;
  };
}
