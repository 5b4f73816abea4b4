/**
 * Makes a server API key (docs/server-api.md "Authentication"):
 *   npm run server-key
 * prints the key, for the app's backend (keep it secret), and the hash to add to SERVER_API_KEYS.
 */
import { newServerKey } from '../src/auth/serverKeys.js';

const { key, hash } = newServerKey();
process.stdout.write(`key (give it to your backend):  ${key}\nSERVER_API_KEYS entry:          ${hash}\n`);
