/** The largest `custom` live signal value, as JSON text (docs/signaling.md "Live signals"). */
export const SIGNAL_CUSTOM_MAX_BYTES = 1024;
