export { CallingClient, ProblemError, type ClientOptions, type CatchUpResult } from './http.js';
export { SignalingClient, SignalingAuthError, SignalingUnavailableError, type SignalingOptions, type AuthFailure, type AnyWebSocketClass } from './signaling.js';
export { EventFilter } from './eventFilter.js';
export type { FetchLike, FetchResponse } from './runtime.js';
export type * from './types.js';
export {
  MediaSessionKeeper,
  MediaSessionStoppedError,
  mediaSessionRetryDelay,
  type MediaSessionKeeperOptions,
  type MediaSessionReason,
  type MediaSessionSource,
} from './media.js';
