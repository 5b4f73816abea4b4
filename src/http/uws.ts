import uWS from 'uWebSockets.js';

/**
 * uWebSockets.js comes from a package that silently falls back to a slow `ws`-based shim when its
 * native binary does not load. The shim lacks the native-only exports checked here; refuse to
 * run on it unless explicitly allowed (ALLOW_UWS_FALLBACK=true).
 */
export function isNativeUws(mod: object = uWS): boolean {
  const m = mod as Record<string, unknown>;
  return typeof m.getParts === 'function' && typeof m.SSLApp === 'function';
}

export function loadUws(allowFallback: boolean): typeof uWS {
  if (!isNativeUws() && !allowFallback) {
    throw new Error(
      'uWebSockets.js native binary did not load (the package fell back to its slow ws shim); ' +
        'fix the install for this Node.js version, or set ALLOW_UWS_FALLBACK=true to run slowly anyway',
    );
  }
  return uWS;
}
