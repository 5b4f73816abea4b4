import type { Task } from './task.js';

/** The tasks a generator process can run; each module exports `createTask()`. */

export const TASKS: Record<string, () => Promise<Task>> = {
  calls: async () => (await import('./calls.js')).createTask(),
  group: async () => (await import('./group.js')).createTask(),
  idle: async () => (await import('./idle.js')).createTask(),
  timers: async () => (await import('./timers.js')).createTask(),
  delivery: async () => (await import('./delivery.js')).createTask(),
  signals: async () => (await import('./signals.js')).createTask(),
  httpLoad: async () => (await import('./httpLoad.js')).createTask(),
  redisCeiling: async () => (await import('./redisCeiling.js')).createTask(),
  pushFakes: async () => (await import('./pushFakes.js')).createTask(),
  soak: async () => (await import('./soak.js')).createTask(),
  stormChanges: async () => (await import('./stormChanges.js')).createTask(),
  stormDevices: async () => (await import('./stormDevices.js')).createTask(),
  sioStormDevices: async () => (await import('./sioStormDevices.js')).createTask(),
};
