/** The largest in-call message payload, as JSON text (docs/api.md "In-call messages"). */
export const MESSAGE_PAYLOAD_MAX_BYTES = 16 * 1024;

/**
 * Room for an in-call message's envelope (type, callId, operationId and JSON punctuation) around
 * a payload of the largest size: the HTTP route's body limit and the default signaling frame
 * limit are both this much more than the payload, so a video SDP offer fits either transport.
 */
export const MESSAGE_ENVELOPE_BYTES = 1024;
/** The HTTP route's body limit and WS_MAX_MESSAGE_BYTES's default. */
export const MESSAGE_MAX_BYTES = MESSAGE_PAYLOAD_MAX_BYTES + MESSAGE_ENVELOPE_BYTES;
