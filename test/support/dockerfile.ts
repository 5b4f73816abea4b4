import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/**
 * No Docker engine runs here, so the image's build is checked by running the Dockerfile's own
 * instructions: each stage gets a directory standing for its filesystem root, COPY copies from
 * the build context (the repository as .dockerignore filters it) or from an earlier stage, RUN
 * runs in the stage's WORKDIR with its ENV. What cannot be run here (FROM's base image) is
 * reported for the caller to check. Supports the instructions our Dockerfile uses.
 */

export interface Stage {
  name: string;
  from: string;
  /** The directory that stands for this stage's `/`. */
  root: string;
  workdir: string;
  env: Record<string, string>;
  user: string | undefined;
  cmd: string[] | undefined;
  healthcheck: string[] | undefined;
  expose: string[];
}

/** Logical lines: continuations joined, comments and blank lines dropped. */
export function dockerfileLines(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (cur === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      cur += `${line.slice(0, -1)} `;
      continue;
    }
    out.push(cur + line);
    cur = '';
  }
  if (cur) out.push(cur);
  return out;
}

/** `.dockerignore` as a predicate over context-relative paths (the patterns our file uses). */
export function dockerignore(text: string): (path: string) => boolean {
  const patterns = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((p) => new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(/.*)?$`));
  return (path) => patterns.some((re) => re.test(path));
}

export interface BuildResult {
  stages: Stage[];
  /** The last stage: the image. */
  image: Stage;
}

/** Runs the Dockerfile's stages under `workDir`, the repository at `context` as the build context. */
export function buildDockerfile(context: string, workDir: string, buildArgs: Record<string, string> = {}): BuildResult {
  const ignored = dockerignore(existsSync(join(context, '.dockerignore')) ? readFileSync(join(context, '.dockerignore'), 'utf8') : '');
  const args: Record<string, string> = { ...buildArgs };
  const stages: Stage[] = [];
  let stage: Stage | undefined;
  const expand = (s: string) => s.replace(/\$\{(\w+)\}|\$(\w+)/g, (_m, a: string | undefined, b: string | undefined) => args[a ?? b!] ?? stage?.env[a ?? b!] ?? '');
  const inStage = (s: Stage, p: string) => join(s.root, p.startsWith('/') ? p : join(s.workdir, p));

  for (const line of dockerfileLines(readFileSync(join(context, 'Dockerfile'), 'utf8'))) {
    const [, instruction = '', rest = ''] = /^(\w+)\s+([\s\S]*)$/.exec(line) ?? [];
    const op = instruction.toUpperCase();
    if (op === 'ARG') {
      const [k, v] = rest.split('=');
      if (!(k! in args)) args[k!] = v ?? '';
      continue;
    }
    if (op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(expand(rest));
      const name = m?.[2] ?? String(stages.length);
      stage = { name, from: m![1]!, root: join(workDir, name), workdir: '/', env: {}, user: undefined, cmd: undefined, healthcheck: undefined, expose: [] };
      mkdirSync(stage.root, { recursive: true });
      stages.push(stage);
      continue;
    }
    if (!stage) throw new Error(`${op} before FROM`);
    const s = stage;
    switch (op) {
      case 'WORKDIR':
        s.workdir = expand(rest);
        mkdirSync(join(s.root, s.workdir), { recursive: true });
        break;
      case 'ENV':
        for (const m of rest.matchAll(/(\w+)=("[^"]*"|\S+)/g)) s.env[m[1]!] = expand(m[2]!.replace(/^"|"$/g, ''));
        break;
      case 'COPY': {
        const words = rest.split(/\s+/);
        const fromFlag = words[0]!.startsWith('--from=') ? words.shift()!.slice('--from='.length) : undefined;
        const dest = words.pop()!;
        const source = fromFlag ? stages.find((x) => x.name === fromFlag) : undefined;
        if (fromFlag && !source) throw new Error(`COPY --from=${fromFlag}: no such stage`);
        for (const src of words) {
          const from = source ? inStage(source, src) : join(context, src);
          const to = inStage(s, dest.endsWith('/') ? join(dest, src.split('/').pop()!) : dest);
          mkdirSync(dirname(to), { recursive: true });
          cpSync(from, to, {
            recursive: true,
            filter: (p) => source !== undefined || !ignored(relative(context, p)) || relative(context, p) === '',
          });
          if (!existsSync(to) || (statSync(from).isDirectory() && !statSync(to).isDirectory())) throw new Error(`COPY ${src} ${dest} failed`);
        }
        break;
      }
      case 'RUN':
        execFileSync('sh', ['-c', expand(rest)], {
          cwd: join(s.root, s.workdir),
          env: { ...process.env, ...s.env },
          stdio: 'pipe',
          timeout: 600_000,
        });
        break;
      case 'USER':
        s.user = rest.trim();
        break;
      case 'EXPOSE':
        s.expose.push(...rest.split(/\s+/));
        break;
      case 'CMD':
        s.cmd = JSON.parse(rest) as string[];
        break;
      case 'HEALTHCHECK': {
        const m = /CMD\s+(\[.*\])\s*$/.exec(rest);
        s.healthcheck = m ? (JSON.parse(m[1]!) as string[]) : undefined;
        break;
      }
      case 'STOPSIGNAL':
      case 'LABEL':
        break;
      default:
        throw new Error(`Dockerfile instruction ${op} is not supported by this check`);
    }
  }
  if (!stage) throw new Error('Dockerfile has no FROM');
  return { stages, image: stage };
}
