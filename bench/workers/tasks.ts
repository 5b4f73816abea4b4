/** The tasks a generator process can run; each module exports `createTask()`. */
export interface Task {
  /** Prepares (connects sockets, mints tokens…); its return value goes back to the orchestrator. */
  setup(params: unknown): Promise<unknown>;
  /** One measured run; `progress` streams interim figures to the orchestrator. */
  run(params: unknown, progress: (data: unknown) => void): Promise<unknown>;
  teardown?(): Promise<void>;
}

export const TASKS: Record<string, () => Promise<Task>> = {
  calls: async () => (await import('./calls.js')).createTask(),
  idle: async () => (await import('./idle.js')).createTask(),
  timers: async () => (await import('./timers.js')).createTask(),
  delivery: async () => (await import('./delivery.js')).createTask(),
  httpLoad: async () => (await import('./httpLoad.js')).createTask(),
  redisCeiling: async () => (await import('./redisCeiling.js')).createTask(),
  pushFakes: async () => (await import('./pushFakes.js')).createTask(),
  soak: async () => (await import('./soak.js')).createTask(),
};
