/** What the callee's phone shows for the caller: docs/protocol.md "Limits": displayName is 1..256 UTF-8 bytes. */
export const MAX_DISPLAY_NAME_BYTES = 256;

/** Cuts a string to at most `maxBytes` UTF-8 bytes without splitting a character. */
export function truncateUtf8(s: string, maxBytes: number): string {
  const bytes = Buffer.from(s, 'utf8');
  if (bytes.length <= maxBytes) return s;
  let end = maxBytes;
  // Step back over continuation bytes (10xxxxxx) so a multi-byte character is not split.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

export function displayNameFor(name: string): string {
  const cut = truncateUtf8(name.trim(), MAX_DISPLAY_NAME_BYTES);
  return cut === '' ? '?' : cut;
}

/**
 * The caller's stable application address, `<scheme>:<userId>` (docs/api.md "Caller identity and call back"). The userId is
 * percent-encoded where needed so the handle parses as a URI; `userIdFromHandle` reverses it.
 */
export function handleFor(scheme: string, userId: string): string {
  return `${scheme}:${encodeURIComponent(userId)}`;
}

export function userIdFromHandle(scheme: string, handle: string): string | undefined {
  const prefix = `${scheme}:`;
  if (!handle.startsWith(prefix)) return undefined;
  try {
    return decodeURIComponent(handle.slice(prefix.length));
  } catch {
    return undefined;
  }
}
