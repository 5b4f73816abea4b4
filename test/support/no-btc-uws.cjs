// Preloaded (node --require) by test/e2e/startup.test.ts: makes @btc-vision/uwebsockets.js fail to
// load as it does on glibc < 2.38, so the start-up check can be tested on any machine, whichever
// uWebSockets.js build loads there.
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === '@btc-vision/uwebsockets.js') throw new Error("version `GLIBC_2.38' not found (simulated by test/support/no-btc-uws.cjs)");
  return resolve.call(this, request, ...rest);
};
