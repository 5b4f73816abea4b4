import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { startJanus, type Janus } from '../support/janus.js';

/**
 * The media suites' Janus harness (test/support/janus.ts) turns a Janus that dies under a test into
 * a failure that says so: its exit, a backtrace of its threads where the kernel left a core, and its
 * last output. A SIGSEGV sent to it stands for a real crash.
 */

let janus: Janus | undefined;
afterAll(async () => {
  await janus?.stop().catch(() => undefined);
});

describe('a Janus that crashes under a test', () => {
  it('fails the file at stop() with its exit signal, a backtrace where there is a core, and its last output', async () => {
    janus = await startJanus();
    const pid = janus.pid;
    process.kill(pid, 'SIGSEGV');
    const failure = await janus.stop().then(
      () => undefined,
      (err: Error) => err.message,
    );
    janus = undefined;
    expect(failure).toContain(`janus ${pid} exited unexpectedly (code null, signal SIGSEGV)`);
    expect(failure).toContain('--- backtrace ---');
    // A core, where the kernel writes one to the working folder, gives every thread's stack.
    const pattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8').trim();
    if (!pattern.startsWith('|') && !pattern.includes('/')) expect(failure).toMatch(/Thread 1 .*\n#0 /);
    // Janus's own startup lines, from its stdout.
    expect(failure).toContain('--- its last output ---');
    expect(failure).toMatch(/HTTP webserver started \(port \d+/);
  });
});
