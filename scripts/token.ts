/**
 * Mints a development session token:
 *   npm run token -- --sub alice --iid alice-phone [--name Alice] [--ttl 3600]
 * Uses AUTH_JWT_SECRET, or the dev secret the server created in .data/dev-secret.
 * `--help` prints the usage; an unknown option or a missing one prints it with the error (exit 2).
 */
import { parseArgs } from 'node:util';
import { devSecret, mintToken } from '../src/auth/devTokens.js';

const USAGE = `usage: npm run token -- --sub <userId> --iid <installationId> [--name <display name>] [--ttl <seconds>]

Prints a session token (an HS256 JWT) for one installation, signed with AUTH_JWT_SECRET or, without
it, the dev secret \`npm run dev\` keeps in .data/dev-secret.

  --sub <userId>          the user (claim sub)
  --iid <installationId>  the installation, one per device (claim iid)
  --name <display name>   what callees see as the caller's name (claim name; default: the userId)
  --ttl <seconds>         lifetime (default 86400)
  -h, --help              this text
`;

function fail(message: string): never {
  process.stderr.write(`npm run token: ${message}\n\n${USAGE}`);
  process.exit(2);
}

let values: { sub?: string; iid?: string; name?: string; ttl?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: {
      sub: { type: 'string' },
      iid: { type: 'string' },
      name: { type: 'string' },
      ttl: { type: 'string', default: '86400' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  fail(err instanceof Error ? err.message : String(err));
}
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (!values.sub || !values.iid) fail('--sub and --iid are required');
const ttlSeconds = Number(values.ttl);
if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) fail(`--ttl must be a whole number of seconds, not ${JSON.stringify(values.ttl)}`);
const secret = process.env.AUTH_JWT_SECRET || devSecret('.data/dev-secret');
process.stdout.write(mintToken(secret, { sub: values.sub, iid: values.iid, ...(values.name ? { name: values.name } : {}), ttlSeconds }) + '\n');
