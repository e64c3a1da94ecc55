# syntax=docker/dockerfile:1
# spark-driver-cleaner: one replica of the coordinated Spark driver-pod cleaner.
#
#   docker build -t spark-driver-cleaner:0.1.0 .
#   docker run --read-only --tmpfs /tmp -e SDC_TARGETS=... spark-driver-cleaner:0.1.0
#
# Three stages: `build` compiles TypeScript with the dev dependencies, `prod-deps` installs the
# production dependencies alone, and the final stage copies only those two results onto a fresh
# Node 24 base, so no compiler, test tool or `node` npm package ships in the image.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY workers ./workers
RUN npm run build

FROM node:24-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim AS runtime
# In a container the HTTP server must listen beyond loopback for probes and scrapes; the
# application's own default (127.0.0.1) suits a laptop, not a pod.
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
