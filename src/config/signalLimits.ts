/** The largest `custom` live signal value, as JSON text (docs/signaling.md "Live signals"). */
export const SIGNAL_CUSTOM_MAX_BYTES = 1024;
/** A `reaction` live signal's value: a string of 1 to this many characters. */
export const SIGNAL_REACTION_MAX_CHARS = 32;
