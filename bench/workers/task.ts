/** What a generator process runs (tasks.ts lists them); each task module exports `createTask()`. */
export interface Task {
  /** Prepares (connects sockets, mints tokens…); its return value goes back to the orchestrator. */
  setup(params: unknown): Promise<unknown>;
  /** One measured run; `progress` streams interim figures to the orchestrator. */
  run(params: unknown, progress: (data: unknown) => void): Promise<unknown>;
  teardown?(): Promise<void>;
}
