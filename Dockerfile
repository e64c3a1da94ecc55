# syntax=docker/dockerfile:1
# spark-driver-cleaner: one replica of the coordinated Spark driver-pod cleaner.
#
#   bash scripts/build-image.sh --tag registry.example.com/spark-driver-cleaner:0.2.0
#   podman run --read-only --tmpfs /tmp -e SDC_TARGETS=... registry.example.com/spark-driver-cleaner:0.2.0
#
# Two stages on two bases, each pinned by digest below (docs/image.md, "The bases": how they are made and how a
# digest is obtained and updated):
#   - `build` (BUILD_BASE: Debian with Node 24, npm, python3, make and g++) installs the dependencies, compiles the
#     ZooKeeper client's native addon with our patch, bundles the CLI and its JavaScript dependencies with esbuild
#     (scripts/image/bundle.ts) and writes the SBOM (scripts/image/sbom.ts);
#   - the final stage (RUNTIME_BASE: libc, libstdc++, ca-certificates, tzdata and Node; no shell, no package
#     manager) gets /app alone: the bundle, the few packages that cannot be bundled, package.json, the SBOM.
# scripts/build-base-image.sh makes both bases reproducibly (same Debian packages and Node, same digest) and
# scripts/build-image.sh builds this file with podman on them. With Docker, push the two bases to a registry
# Docker can pull from and pass their digests as --build-arg BUILD_BASE=… RUNTIME_BASE=….
# npm reads an optional build secret `npmrc` (registry, proxies; `cafile=/run/secrets/npm-ca` with the secret
# `npm-ca`), so a private registry or proxy never ends up in a layer.
ARG BUILD_BASE=localhost/spark-driver-cleaner-build-base@sha256:17d56aa366e30ae7b41e3b95fd37912a01b523b2f97d3c56cdebea4e7dd56481
ARG RUNTIME_BASE=localhost/spark-driver-cleaner-runtime-base@sha256:dc9eecb1977d5862f87a310660a8776d0929e06502c0f98ba2fb9db1875fa69e

FROM ${RUNTIME_BASE} AS runtime-base

FROM ${BUILD_BASE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# --ignore-scripts: no install script runs (the `node` dev dependency's would download a second Node binary);
# the one we need, the ZooKeeper client's addon, is built here from its sources with our patch (patches/: why
# is in the file), by node-gyp against the base's own headers (/usr/local/include/node) rather than
# downloaded ones. protobufjs's install script (a version-scheme check that only warns) is the only other.
RUN --mount=type=cache,target=/root/.npm \
    --mount=type=secret,id=npmrc,target=/root/.npmrc \
    --mount=type=secret,id=npm-ca,target=/run/secrets/npm-ca \
    npm ci --ignore-scripts --no-audit --no-fund \
 && for p in patches/zookeeper+*.patch; do patch --forward -d node_modules/zookeeper -p1 <"$p"; done \
 && npm_config_nodedir=/usr/local npm rebuild zookeeper \
 && node -e "require('zookeeper')"
COPY scripts/image ./scripts/image
COPY src ./src
COPY workers ./workers
# The runtime base's package list and Node version, for the SBOM.
COPY --from=runtime-base /var/lib/dpkg/status /tmp/runtime-base/status
COPY --from=runtime-base /usr/local/share/doc/node/package.json /tmp/runtime-base/node-package.json
RUN node scripts/image/bundle.ts /out/app /tmp/shipped.json \
 && node scripts/image/sbom.ts /tmp/shipped.json /tmp/runtime-base/status /tmp/runtime-base/node-package.json \
      /out/app/sbom.cdx.json \
 && node /out/app/dist/src/cli.js --version

FROM runtime-base AS runtime
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
# The dependencies that cannot be bundled change least: their own layer, below the code.
COPY --from=build /out/app/node_modules ./node_modules
COPY --from=build /out/app/dist ./dist
# package.json carries the version and "type": "module", which makes Node load dist/**/*.js as ES modules.
COPY --from=build /out/app/package.json /out/app/sbom.cdx.json ./
# Numeric UID/GID (the base's `node` user) so Kubernetes can verify `runAsNonRoot` without a
# `runAsUser` in the pod spec.
USER 1000:1000
EXPOSE 9090
# Used by `docker run` and compose; Kubernetes ignores it and uses the pod's probes instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.SDC_HTTP_PORT ?? 9090}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "--enable-source-maps", "dist/src/cli.js", "run"]
