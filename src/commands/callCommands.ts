import type { CallCommand } from './command.js';
import { answerCommand } from './answer.js';
import { moveCommand } from './move.js';
import { endCommand } from './end.js';
import { renameCommand } from './rename.js';
import { messageCommand } from './message.js';
import { inviteCommand } from './invite.js';
import { ringingCommand } from './ringing.js';

/** Every command a device may send over either transport, by frame type (docs/signaling.md "Commands"). */
export const CALL_COMMANDS: ReadonlyMap<string, CallCommand> = new Map(
  ([answerCommand, endCommand, moveCommand, renameCommand, messageCommand, inviteCommand, ringingCommand] as CallCommand[]).map((c) => [c.name, c]),
);
