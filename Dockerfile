# syntax=docker/dockerfile:1
# spark-driver-cleaner: one replica of the coordinated Spark driver-pod cleaner.
#
#   docker build -t spark-driver-cleaner:0.1.0 .
#   docker run --read-only --tmpfs /tmp -e SDC_TARGETS=... spark-driver-cleaner:0.1.0
#
# Three stages: `build` compiles TypeScript with the dev dependencies, `prod-deps` installs the
# production dependencies alone (compiling the ZooKeeper client's native addon), and the final stage
# copies only those two results onto a fresh Node 24 base, so no compiler, test tool or `node` npm
# package ships in the image.
#
# BASE_IMAGE: any image laid out as node:24-bookworm-slim (node and npm in /usr/local, user `node`
# with UID/GID 1000); scripts/build-image.sh builds the image with podman on a local one.
# npm reads an optional build secret `npmrc` (registry, proxies; `cafile=/run/secrets/npm-ca` with
# the secret `npm-ca`), so a private registry or proxy never ends up in a layer.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: compiling needs no install script (the `node` dev dependency's would download a
# second Node binary).
RUN --mount=type=cache,target=/root/.npm \
    --mount=type=secret,id=npmrc,target=/root/.npmrc \
    --mount=type=secret,id=npm-ca,target=/run/secrets/npm-ca \
    npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
RUN npm run build

# --omit=optional as well: `typescript` is an optional peer of a production dependency, so
# --omit=dev alone would ship the compiler. msgpackr's optional native decoder goes with it (msgpackr
# falls back to its JavaScript one).
# The ZooKeeper client (`zookeeper`) is a native addon without a Linux prebuilt binary: its install
# script compiles the reference C client and the addon, so this stage (and no other) gets python3,
# make, g++ and patch. Installed without scripts, patched (patches/: why is in the file), then built:
# node-gyp compiles against the base's own headers (/usr/local/include/node) instead of downloading
# them. protobufjs's install script (a version-scheme check that only warns) is the only other one.
# The sources and object files are removed after; the addon stays.
FROM ${BASE_IMAGE} AS prod-deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ patch \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
RUN --mount=type=cache,target=/root/.npm \
    --mount=type=secret,id=npmrc,target=/root/.npmrc \
    --mount=type=secret,id=npm-ca,target=/run/secrets/npm-ca \
    npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
 && for p in patches/zookeeper+*.patch; do patch --forward -d node_modules/zookeeper -p1 <"$p"; done \
 && npm_config_nodedir=/usr/local npm rebuild zookeeper \
 && rm -rf node_modules/zookeeper/deps/zookeeper-client-c node_modules/zookeeper/build/Release/obj.target \
 && node -e "require('zookeeper')"

FROM ${BASE_IMAGE} AS runtime
# The process runs `node` alone: the package managers the base ships (npm, npx, corepack, yarn) and
# Node's C headers go.
RUN rm -rf /usr/local/include/node /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx \
      /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
# In a container the HTTP server must listen beyond loopback for probes and scrapes; the
# application's own default (127.0.0.1) suits a laptop, not a pod. Beyond loopback the replica
# refuses to start without SDC_DASHBOARD_USER/SDC_DASHBOARD_PASSWORD (the Deployment takes them from
# its Secret), unless SDC_HTTP_ALLOW_UNAUTHENTICATED=true says a NetworkPolicy or a sidecar guards the port.
ENV NODE_ENV=production \
    SDC_HTTP_HOST=0.0.0.0 \
    SDC_HTTP_PORT=9090
WORKDIR /app
# Files stay owned by root and unwritable by the runtime user: the process can read its code but
# never change it. It writes nothing outside /tmp, so the root filesystem can be mounted read-only.
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# package.json carries "type": "module", which makes Node load dist/**/*.js as ES modules.
COPY package.json ./
# Numeric UID/GID (the image's `node` user) so Kubernetes can verify `runAsNonRoot` without a
# `runAsUser` in the pod spec.
USER 1000:1000
EXPOSE 9090
# Used by `docker run` and compose; Kubernetes ignores it and uses the pod's probes instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.SDC_HTTP_PORT ?? 9090}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "--enable-source-maps", "dist/src/cli.js", "run"]
