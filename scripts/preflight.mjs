#!/usr/bin/env node
// What `npm run dev` and the test commands need from the system, checked before anything runs
// (docs/development.md "What the commands need"). Plain Node.js with no dependencies, so it runs
// on a fresh clone before `npm install` has built anything.
//
//   node scripts/preflight.mjs dev    redis-server, unless REDIS_URL or REDIS_CLUSTER_NODES is set
//   node scripts/preflight.mjs fast   redis-server, curl (npm run test:fast)
//   node scripts/preflight.mjs test   redis-server, curl, chromium, coturn, janus, debootstrap, haproxy, and as
//                                     root docker.io and docker-compose (npm test)
//
// A missing tool is installed with apt-get when this user is root or has passwordless sudo, on a
// Debian or Ubuntu system. Otherwise the script stops at once with one message that names every
// missing tool and the command that installs it, and exits 1: no test starts and then fails on
// a missing binary. On a system without apt-get (macOS), the message also names the parts that
// cannot run there.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Each tool: the binaries it provides, its Debian package, and what needs it. */
const TOOLS = {
  'redis-server': { bins: ['redis-server'], pkg: 'redis-server', brew: 'redis', part: 'every integration suite' },
  curl: { bins: ['curl'], pkg: 'curl', brew: 'curl', part: 'the shell code samples of the docs (test/e2e/doc-samples.test.ts)' },
  chromium: { bins: ['chromium'], pkg: 'chromium', brew: null, part: 'the browser suites (test/browser, test/e2e/client-browser.test.ts) and the bench report test' },
  coturn: { bins: ['turnserver', 'turnutils_uclient'], pkg: 'coturn', brew: 'coturn', part: 'the TURN suites (test/integration/turn-allocation.test.ts, test/browser)' },
  janus: { bins: ['janus'], pkg: 'janus', brew: null, part: 'the SFU suite (test/integration/janus-media.test.ts: Janus 1.1 with its VideoRoom plugin)' },
  debootstrap: { bins: ['debootstrap'], pkg: 'debootstrap', brew: null, part: 'the Node-matrix suite (test/e2e/node-versions.test.ts: Node 22/24 on a Debian trixie root)' },
  haproxy: { bins: ['haproxy'], pkg: 'haproxy', brew: 'haproxy', part: 'the proxy suite (test/e2e/proxy.test.ts: deploy/haproxy/haproxy.cfg in front of two servers)' },
  // Root only: the image suite starts a Docker daemon of its own, and without root it says so and
  // does not run (test/e2e/image.test.ts).
  docker: { bins: ['dockerd', 'docker'], pkg: 'docker.io', brew: null, rootOnly: true, part: 'the image suite (test/e2e/image.test.ts)' },
  'docker-compose': { bins: ['docker-compose'], pkg: 'docker-compose', brew: null, rootOnly: true, part: 'the image suite (test/e2e/image.test.ts: docker-compose.yml)' },
};
const isRoot = process.getuid?.() === 0;

const NEEDS = {
  dev: () => (process.env.REDIS_URL || process.env.REDIS_CLUSTER_NODES ? [] : ['redis-server']),
  fast: () => ['redis-server', 'curl'],
  test: () => ['redis-server', 'curl', 'chromium', 'coturn', 'janus', 'debootstrap', 'haproxy', 'docker', 'docker-compose'].filter((t) => isRoot || !TOOLS[t].rootOnly),
};

const mode = process.argv[2] ?? 'test';
if (!(mode in NEEDS)) {
  console.error(`preflight: unknown mode "${mode}" (dev, fast or test)`);
  process.exit(2);
}

/** PATH plus the sbin folders, where Debian puts debootstrap and which a user's PATH may lack. */
const searchPath = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'];
const onPath = (bin) => searchPath.some((dir) => dir && existsSync(join(dir, bin)));
/** Chromium may live elsewhere: the browser tests take CHROMIUM_PATH, as this check does. */
const present = (t) => (t === 'chromium' && process.env.CHROMIUM_PATH ? existsSync(process.env.CHROMIUM_PATH) : TOOLS[t].bins.every(onPath));
const missingTools = () => NEEDS[mode]().filter((t) => !present(t));

let missing = missingTools();
if (missing.length === 0) process.exit(0);

const hasApt = onPath('apt-get') || existsSync('/usr/bin/apt-get');
const sudoWorks = !isRoot && onPath('sudo') && spawnSync('sudo', ['-n', 'true'], { stdio: 'ignore' }).status === 0;
const pkgs = [...new Set(missing.map((t) => TOOLS[t].pkg))];

// PREFLIGHT_NO_INSTALL=1 reports instead of installing, as for a user without sudo (tests).
if (hasApt && (isRoot || sudoWorks) && process.env.PREFLIGHT_NO_INSTALL !== '1') {
  const run = (args) => {
    const [cmd, ...rest] = isRoot ? args : ['sudo', '-n', ...args];
    execFileSync(cmd, rest, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  };
  console.error(`preflight: installing ${pkgs.join(', ')} with apt-get (needed by ${mode === 'dev' ? 'npm run dev' : 'the test suite'})`);
  try {
    run(['apt-get', 'update', '-qq']);
    run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...pkgs]);
  } catch (err) {
    console.error(`preflight: apt-get failed (${err.message.split('\n')[0]})`);
  }
  // apt starts coturn's and Janus's own daemons on install on some systems; the tests start
  // theirs on free ports.
  missing = missingTools();
  if (missing.length === 0) process.exit(0);
}

const lines = [`preflight: ${mode === 'dev' ? 'npm run dev' : 'the tests'} cannot start: missing ${missing.map((t) => TOOLS[t].bins.join(' and ')).join(', ')}.`];
for (const t of missing) lines.push(`  - ${TOOLS[t].bins.join(', ')}: needed by ${mode === 'dev' ? 'the embedded development Redis (or set REDIS_URL)' : TOOLS[t].part}`);
if (hasApt) {
  lines.push('Install them (as root, or with sudo) and run the command again:');
  lines.push(`  sudo apt-get install -y --no-install-recommends ${pkgs.join(' ')}`);
} else {
  const brew = missing.map((t) => TOOLS[t].brew).filter(Boolean);
  const none = missing.filter((t) => !TOOLS[t].brew && t !== 'chromium');
  if (brew.length) lines.push(`Install with Homebrew: brew install ${brew.join(' ')}`);
  if (missing.includes('chromium')) lines.push('Chromium: install it and set CHROMIUM_PATH to its binary.');
  for (const t of none) lines.push(`${TOOLS[t].bins[0]} runs only on Linux: ${TOOLS[t].part} cannot run on this system. Use \`npm run test:fast\` here and let CI run the whole suite.`);
}
if (mode === 'test' && !missing.some((t) => NEEDS.fast().includes(t))) {
  lines.push(`\`npm run test:fast\` needs only ${NEEDS.fast().join(' and ')}.`);
}
console.error(lines.join('\n'));
process.exit(1);
