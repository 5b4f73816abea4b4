export { CallingClient, ProblemError, type Problem, type CallEventsPage, type PushTokenRegistration } from './http.js';
export { SignalingClient, type SignalingOptions } from './signaling.js';
export type { CallSnapshot } from '../calls/snapshot.js';
export type { EventPayload, InvitationPayload, AcceptedPayload, EndedPayload } from '../events/payloads.js';
