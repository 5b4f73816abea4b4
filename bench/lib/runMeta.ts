/** What a bench run records about itself: the header of every report (output.ts, htmlReport.ts). */
export interface RunMeta {
  startedAt: string;
  durationS: number;
  mode: string;
  command: string;
  gitCommit: string;
  node: string;
  redis: string;
  machine: string;
  openFilesLimit: string;
  generators: number;
  target: string;
  redisLaunch: string;
  push: string;
  topology: string;
}
