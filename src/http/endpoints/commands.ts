import type { CallCommand } from '../callCommand.js';
import { answerCommand } from './answerCall.js';
import { endCommand } from './endCall.js';
import { renameCommand } from './renameCall.js';
import { messageCommand } from './callMessages.js';

/** Every command a device may send over either transport, by frame type (docs/signaling.md "Commands"). */
export const CALL_COMMANDS: ReadonlyMap<string, CallCommand> = new Map(
  ([answerCommand, endCommand, renameCommand, messageCommand] as CallCommand[]).map((c) => [c.name, c]),
);
