/**
 * Mints a development session token:
 *   npm run token -- --sub alice --iid alice-phone [--name Alice] [--ttl 3600]
 * Uses AUTH_JWT_SECRET, or the dev secret the server created in .data/dev-secret.
 */
import { parseArgs } from 'node:util';
import { devSecret, mintToken } from '../src/auth/devTokens.js';

const { values } = parseArgs({
  options: {
    sub: { type: 'string' },
    iid: { type: 'string' },
    name: { type: 'string' },
    ttl: { type: 'string', default: '86400' },
  },
});
if (!values.sub || !values.iid) {
  process.stderr.write('usage: npm run token -- --sub <userId> --iid <installationId> [--name <display name>] [--ttl <seconds>]\n');
  process.exit(2);
}
const secret = process.env.AUTH_JWT_SECRET || devSecret('.data/dev-secret');
process.stdout.write(
  mintToken(secret, { sub: values.sub, iid: values.iid, ...(values.name ? { name: values.name } : {}), ttlSeconds: Number(values.ttl) }) + '\n',
);
