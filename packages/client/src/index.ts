export { CallingClient, ProblemError, type ClientOptions, type CatchUpResult } from './http.js';
export { SignalingClient, SignalingAuthError, type SignalingOptions, type AuthFailure, type AnyWebSocketClass } from './signaling.js';
export { EventFilter } from './eventFilter.js';
export type { FetchLike, FetchResponse } from './runtime.js';
export type * from './types.js';
