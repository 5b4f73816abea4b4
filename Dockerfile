# The one way the calling-backend image is built (docs/operations.md "The image").
#
# Node 24 on Debian trixie: the uWebSockets.js binary this server loads on Node 22+
# (@btc-vision/uwebsockets.js) needs glibc >= 2.38; trixie has 2.41 (docs/operations.md
# "Supported Node versions"). NODE_IMAGE builds; the runtime is DEBIAN_IMAGE, the same Debian
# release, with only the node binary taken from NODE_IMAGE (its npm, yarn and headers stay out).
ARG NODE_IMAGE=node:24-trixie-slim
ARG DEBIAN_IMAGE=debian:trixie-slim

# --- build: every dependency, TypeScript compiled to dist/, then production dependencies only ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
# npm ci's postinstall mends a dependency (docs/development.md "Installed dependency patch").
COPY scripts/patch-dependencies.mjs ./scripts/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
COPY lua ./lua
# Dev dependencies out, then only the uWebSockets.js binary this Node.js loads, and no maps,
# TypeScript, Markdown or packages' tests and docs (scripts/prune-image.mjs).
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund \
  && node scripts/prune-image.mjs

# --- runtime: Debian, node, the compiled server and its production dependencies, non-root ------
FROM ${DEBIAN_IMAGE} AS runtime
COPY --from=build /usr/local/bin/node /usr/local/bin/node
# uid 1000, as the official Node.js images name it.
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --no-create-home --shell /usr/sbin/nologin node
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY lua ./lua
# The browser softphone's static files, served only with DEMO=true (docs/development.md "Browser softphone").
COPY demo ./demo
# Listen on every interface inside the container; the metrics listener too (publish it only to
# the scraper's network, never to the internet).
ENV HOST=0.0.0.0 PORT=8080 METRICS_HOST=0.0.0.0 METRICS_PORT=9464
EXPOSE 8080 9464
USER node
# Ready = Redis answers, scripts loaded, not shutting down (GET /readyz, no token; fetch sends
# HTTP/1.1 with Host, which the server requires: docs/operations.md "Health checks").
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node runs as PID 1 and handles SIGTERM itself (graceful shutdown, docs/operations.md "Running it");
# it starts no child processes in production, so there is nothing for an init to reap.
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
