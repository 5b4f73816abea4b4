import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomInt, randomUUID } from 'node:crypto';
import { CACHE, nodeBinary, npmPackage, trixieRoot } from './otherNode.js';
import { diesWithParent } from './redis-server.js';
import { waitUntil } from './wait.js';
import { isAlive, terminate } from './processes.js';

/**
 * A real Docker engine for the image tests (docs/operations.md "The image"): Debian's `docker.io`
 * daemon started just for this test file, isolated from anything else on the machine (its own data
 * and exec roots, socket, containerd namespace and address pool; no iptables, no default bridge),
 * and stopped with everything it ran. No image registry is reachable, so the base images the
 * Dockerfile and docker-compose.yml name are made here, under those names, from what the
 * Node-version suite caches (test/support/otherNode.ts): Debian trixie made with debootstrap, the
 * npm registry's Node.js binary and npm. Redis and haproxy stand in from Debian's packages.
 * The daemon's images and build cache are kept in ~/.cache/calling-backend/docker between runs
 * (the first run builds everything: several minutes; later ones rebuild what changed), used by
 * one test process at a time: another one meanwhile gets a fresh, temporary data root.
 */

/** Docker's own client from the docker.io package: another `docker` may come first on PATH. */
const DOCKER = existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker';
const NODE_MAJOR = 24;
/** The names the Dockerfile's ARGs and docker-compose.yml's images default to. */
export const IMAGES = { node: `node:${NODE_MAJOR}-trixie-slim`, debian: 'debian:trixie-slim', redis: 'redis:7', haproxy: 'haproxy:3.0' } as const;

/** Why the Docker tests cannot run here, or undefined when they can. */
export function dockerUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'they need Linux (a Docker daemon of their own)';
  if (process.getuid?.() !== 0) return 'they need root to start a Docker daemon of their own; run the suite as root (CI does)';
  for (const bin of ['dockerd', 'docker-compose', 'debootstrap']) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`], { env: { PATH: `${process.env.PATH}:/usr/sbin:/sbin` } }).status !== 0) {
      return `${bin} is missing (npm test installs docker.io, docker-compose and debootstrap as root: scripts/preflight.mjs)`;
    }
  }
  return undefined;
}

export interface DockerEngine {
  /** The environment that points a docker or docker-compose client at this daemon. */
  env: Record<string, string>;
  /** Runs the docker client; resolves with its stdout, rejects with its stderr. */
  docker(args: string[], opts?: { cwd?: string; timeoutMs?: number }): Promise<string>;
  /** Runs docker-compose (Debian's) with `env` added to the daemon's. */
  compose(args: string[], opts: { cwd: string; env: Record<string, string>; timeoutMs?: number }): Promise<string>;
  /** The daemon's hard open-file limit: containers cannot be given more without CAP_SYS_RESOURCE. */
  openFilesLimit(): number;
  /** Removes the containers `run` started, stops the daemon, removes its files. */
  stop(): Promise<void>;
  logs(): string;
}

const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 30_000;

/** The cached data root, locked for this process; undefined when another process holds it. */
function lockCachedDataRoot(): { dataRoot: string; release(): void } | undefined {
  const dataRoot = join(CACHE, 'docker');
  const lock = `${dataRoot}.lock`;
  mkdirSync(CACHE, { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return { dataRoot, release: () => rmSync(lock, { force: true }) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSync(lock, 'utf8'));
      if (isAlive(holder)) return undefined;
      unlinkSync(lock); // left by a test process that died
    }
  }
  return undefined;
}

export async function startDockerEngine(): Promise<DockerEngine> {
  const dir = mkdtempSync(join(tmpdir(), 'dockerd-'));
  const cached = lockCachedDataRoot();
  const dataRoot = cached?.dataRoot ?? join(dir, 'data');
  const socket = join(dir, 'docker.sock');
  const namespace = `calling-test-${randomUUID().slice(0, 8)}`;
  const args = [
    '--iptables=false',
    '--ip6tables=false',
    '--bridge=none',
    `--data-root=${dataRoot}`,
    `--exec-root=${join(dir, 'exec')}`,
    `--pidfile=${join(dir, 'docker.pid')}`,
    `--host=unix://${socket}`,
    `--containerd-namespace=${namespace}`,
    `--containerd-plugins-namespace=${namespace}-plugins`,
    `--default-address-pool=base=${freeSubnet()},size=26`,
  ];
  const { command, argv } = diesWithParent('dockerd', args);
  const child: ChildProcess = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: `${process.env.PATH}:/usr/sbin:/sbin` } });
  let output = '';
  const keep = (c: string) => (output = (output + c).slice(-50_000));
  child.stdout!.setEncoding('utf8').on('data', keep);
  child.stderr!.setEncoding('utf8').on('data', keep);
  const env = { DOCKER_HOST: `unix://${socket}` };

  const run = (cmd: string, cmdArgs: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}) =>
    new Promise<string>((resolve, reject) => {
      execFile(cmd, cmdArgs, { cwd: opts.cwd, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env, ...opts.env }, maxBuffer: 64 << 20, timeout: opts.timeoutMs ?? 120_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${cmd} ${cmdArgs.join(' ')}: ${err.message}\n${stderr.slice(-4000)}`)) : resolve(stdout),
      );
    });

  const engine: DockerEngine = {
    env,
    docker: (a, opts = {}) => run(DOCKER, a, opts),
    compose: (a, opts) => run('docker-compose', a, opts),
    openFilesLimit() {
      const limits = readFileSync(`/proc/${child.pid}/limits`, 'utf8');
      return Number(/^Max open files\s+\S+\s+(\d+)/m.exec(limits)?.[1] ?? 1024);
    },
    logs: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        // Containers still running (a test that failed half-way) go first, each by its id.
        const ids = (await run(DOCKER, ['ps', '-aq']).catch(() => '')).split('\n').filter(Boolean);
        if (ids.length > 0) await run(DOCKER, ['rm', '-f', ...ids]).catch(() => '');
        // Images no tag names any more (older builds) would pile up in the cache; a day keeps the
        // build stage's layers, which no tag names either, for the next run.
        await run(DOCKER, ['image', 'prune', '-f', '--filter', 'until=24h']).catch(() => '');
        await terminate(child, STOP_GRACE_MS);
      }
      unmountUnder(dir);
      unmountUnder(dataRoot);
      rmSync(dir, { recursive: true, force: true });
      cached?.release();
    },
  };
  try {
    await waitUntil('dockerd answering', async () => {
      if (child.exitCode !== null) throw new Error(`dockerd exited ${child.exitCode}:\n${output.slice(-4000)}`);
      return run(DOCKER, ['version'], { timeoutMs: 5_000 }).then(() => true, () => false);
    }, START_TIMEOUT_MS);
  } catch (err) {
    await engine.stop();
    throw err;
  }
  return engine;
}

/** A /24 for the daemon's networks that no route on this machine uses (others may run Docker too). */
function freeSubnet(): string {
  const routes = spawnSync('ip', ['-4', 'route'], { encoding: 'utf8' }).stdout ?? '';
  for (;;) {
    const subnet = `10.213.${randomInt(0, 256)}.0`;
    if (!routes.includes(subnet.slice(0, -1))) return `${subnet}/24`;
  }
}

/** Mounts the daemon left under `dir` (only if it died without cleaning up): ours alone. */
function unmountUnder(dir: string): void {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4] ?? '').filter((m) => m.startsWith(`${dir}/`));
  for (const m of mounts.sort().reverse()) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
}

/**
 * The base images, under the names the Dockerfile's ARGs default to: Debian trixie as its slim
 * image is (no apt lists, documentation or locales), and Node.js on it as the official image lays
 * it out (node and npm in /usr/local, user `node` with uid 1000). When this machine reaches the
 * npm registry through a proxy with its own certificate authority (NODE_EXTRA_CA_CERTS), the Node
 * image trusts that authority too, so `npm ci` in the build works as it does here.
 */
export async function makeBaseImages(engine: DockerEngine): Promise<void> {
  if (await hasImages(engine, [IMAGES.debian, IMAGES.node])) return;
  const root = trixieRoot();
  const slim = ['var/cache/apt/archives/*.deb', 'var/lib/apt/lists/*', 'usr/share/doc/*', 'usr/share/man/*', 'usr/share/locale/*', 'usr/share/info/*', 'dev/*', 'proc/*', 'sys/*'];
  const work = mkdtempSync(join(tmpdir(), 'base-images-'));
  try {
    const tarball = join(work, 'trixie.tar');
    const tar = spawnSync('tar', ['-C', root, '-cf', tarball, '--numeric-owner', ...slim.map((p) => `--exclude=./${p}`), '.']);
    if (tar.status !== 0) throw new Error(`tar of ${root}: ${tar.stderr.toString()}`);
    await engine.docker(['import', '--change', 'CMD ["bash"]', tarball, IMAGES.debian]);

    const context = join(work, 'node');
    mkdirSync(context);
    copyFileSync(nodeBinary(NODE_MAJOR), join(context, 'node'));
    cpSync(npmPackage(11), join(context, 'npm'), { recursive: true });
    const ca = process.env.NODE_EXTRA_CA_CERTS;
    const trustCa = ca !== undefined && existsSync(ca);
    if (trustCa) copyFileSync(ca, join(context, 'extra-ca.crt'));
    writeFileSync(
      join(context, 'Dockerfile'),
      [
        `FROM ${IMAGES.debian}`,
        'COPY node /usr/local/bin/node',
        'COPY npm /usr/local/lib/node_modules/npm',
        'RUN chmod 755 /usr/local/bin/node && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\',
        '  && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node',
        ...(trustCa ? ['COPY extra-ca.crt /usr/local/share/calling-test-ca.crt', 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/calling-test-ca.crt'] : []),
        'CMD ["node"]',
      ].join('\n'),
    );
    await engine.docker(['build', '--network', 'host', '-t', IMAGES.node, context], { timeoutMs: 300_000 });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Stand-ins for the compose file's `redis:7` and `haproxy:3.0`, from Debian trixie's packages,
 * behaving as the official images do where the stack relies on it: Redis without protected mode
 * (the official image builds it so; clients come from the compose network), haproxy reading
 * /usr/local/etc/haproxy/haproxy.cfg in the foreground as user haproxy.
 */
export async function makeStandIns(engine: DockerEngine): Promise<void> {
  if (await hasImages(engine, [IMAGES.redis, IMAGES.haproxy])) return;
  const context = mkdtempSync(join(tmpdir(), 'stand-ins-'));
  try {
    writeFileSync(
      join(context, 'Dockerfile'),
      [
        `FROM ${IMAGES.debian} AS packages`,
        'RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server haproxy && rm -rf /var/lib/apt/lists/*',
        'FROM packages AS redis',
        'WORKDIR /data',
        `ENTRYPOINT ["sh", "-c", "if [ \\"$1\\" = redis-server ]; then shift; exec redis-server \\"$@\\" --protected-mode no; fi; exec \\"$@\\"", "--"]`,
        'CMD ["redis-server"]',
        'FROM packages AS haproxy',
        'USER haproxy',
        'STOPSIGNAL SIGUSR1',
        'CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]',
      ].join('\n'),
    );
    for (const target of ['redis', 'haproxy'] as const) {
      await engine.docker(['build', '--network', 'host', '--target', target, '-t', IMAGES[target], context], { timeoutMs: 300_000 });
    }
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

/** Whether every image is there already (made by an earlier run into the cached data root). */
function hasImages(engine: DockerEngine, names: string[]): Promise<boolean> {
  return engine.docker(['image', 'inspect', ...names]).then(() => true, () => false);
}
