import { BlockList, isIP } from 'node:net';

/**
 * What counts as a private network for a webhook URL in `http://` (docs/webhooks.md "Private
 * networks"): cleartext is allowed only where the public internet cannot carry it. The check is
 * on the address as written in the URL; names are not resolved.
 */

/** The address ranges: loopback, RFC 1918, link-local, unique local IPv6 (IPv4-mapped forms match too). */
export const PRIVATE_RANGES: readonly [string, number, 'ipv4' | 'ipv6'][] = [
  ['127.0.0.0', 8, 'ipv4'], // loopback
  ['10.0.0.0', 8, 'ipv4'], // RFC 1918
  ['172.16.0.0', 12, 'ipv4'], // RFC 1918
  ['192.168.0.0', 16, 'ipv4'], // RFC 1918
  ['169.254.0.0', 16, 'ipv4'], // link-local
  ['::1', 128, 'ipv6'], // loopback
  ['fc00::', 7, 'ipv6'], // unique local
  ['fe80::', 10, 'ipv6'], // link-local
];

const privateAddresses = new BlockList();
for (const [network, prefix, family] of PRIVATE_RANGES) privateAddresses.addSubnet(network, prefix, family);

/** Names that never resolve in the public DNS: `localhost` (RFC 6761), `.internal`, `.home.arpa` (RFC 8375), `.local` (RFC 6762). */
const LOCAL_NAME = /(^|\.)(localhost|internal|home\.arpa|local)$/;

/**
 * Whether `hostname` (a URL's hostname: IPv6 in brackets, as WHATWG URL normalises it) is on a
 * private network: an address in one of the ranges above, a local name, or a single-label name
 * (a container or service name, such as Docker Compose and Kubernetes give, which only the
 * local resolver answers).
 */
export function isPrivateNetworkHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  const family = isIP(host);
  if (family !== 0) return privateAddresses.check(host, family === 4 ? 'ipv4' : 'ipv6');
  return LOCAL_NAME.test(host) || (host !== '' && !host.includes('.'));
}
