import { buildServer } from './serverBuild.js';

/** Once per test run, before any test file: the server the tests start (./serverBuild.ts). */
export default function setup(): void {
  buildServer();
}
