# The one way the calling-backend image is built (README "Deployment").
#
# Node 24 on Debian trixie: the uWebSockets.js binary this server loads on Node 22+
# (@btc-vision/uwebsockets.js) needs glibc >= 2.38; trixie has 2.41 (README "Supported Node versions").
ARG NODE_IMAGE=node:24-trixie-slim

# --- build: every dependency, TypeScript compiled to dist/ ---------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
# npm ci's postinstall mends a dependency (README "Installed dependency patch").
COPY scripts/patch-dependencies.mjs ./scripts/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
COPY lua ./lua
RUN npm run build

# --- runtime: production dependencies only, non-root -------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
COPY scripts/patch-dependencies.mjs ./scripts/
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY lua ./lua
# The browser softphone's static files, served only with DEMO=true (README "Browser softphone").
COPY demo ./demo
# Listen on every interface inside the container; the metrics listener too (publish it only to
# the scraper's network, never to the internet).
ENV HOST=0.0.0.0 PORT=8080 METRICS_HOST=0.0.0.0 METRICS_PORT=9464
EXPOSE 8080 9464
USER node
# Ready = Redis answers, scripts loaded, not shutting down (GET /readyz, no token).
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node runs as PID 1 and handles SIGTERM itself (graceful shutdown, README "Operations"); it starts
# no child processes in production, so there is nothing for an init to reap.
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
