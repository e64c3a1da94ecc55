#!/usr/bin/env bash
# Builds the container image with podman, without Docker and without pulling from a public registry.
#
#   bash scripts/build-image.sh [--tag NAME]        (default spark-driver-cleaner:dev)
#
# 1. A local stand-in for `node:24-bookworm-slim` (the Dockerfile's default base): Debian bookworm from
#    Debian's packages, Node 24 and npm from the npm registry, the `node` user with UID 1000
#    (scripts/build-base-image.sh; made once, then reused while its inputs stay the same).
# 2. `podman build` of the Dockerfile with that base (build argument BASE_IMAGE). npm inside the build
#    reaches the registry the way this machine does: the registry URL, CA file and proxies of the
#    machine's npm configuration go in as build secrets (mounted for the `npm ci` steps only, never in a
#    layer), and the build uses the host's network.
#
# scripts/image-report.sh lists the image's size, layers and packages.
# Needs podman, runc and (for the base) mmdebstrap, which scripts/install-test-tools.sh installs as root,
# and the npm dev dependencies (npm ci). Podman reads scripts/podman/containers.conf unless CONTAINERS_CONF is set.
# Prints the image's name on stdout last; progress goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

tag=spark-driver-cleaner:dev
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/scripts/podman/containers.conf}
need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "build-image: $1 not found (bash scripts/install-test-tools.sh installs it)" >&2
    exit 1
  }
}
need podman
# The project's Node and npm (the `node` dev dependency) before the system's.
export PATH="$root/node_modules/.bin:$PATH"

base=$(bash scripts/build-base-image.sh)

# npm's registry settings as build secrets: a file of their own, removed on exit.
secrets=$(mktemp -d)
trap 'rm -rf "$secrets"' EXIT
npm_get() {
  local v
  v=$(npm config get "$1" 2>/dev/null || true)
  [[ $v == null || $v == undefined ]] && v=
  printf '%s' "$v"
}
{
  echo "registry=$(npm_get registry)"
  proxy=$(npm_get proxy)
  https_proxy=$(npm_get https-proxy)
  noproxy=$(npm_get noproxy)
  [[ -n $proxy ]] && echo "proxy=$proxy"
  [[ -n $https_proxy ]] && echo "https-proxy=$https_proxy"
  [[ -n $noproxy ]] && echo "noproxy=$noproxy"
} >"$secrets/npmrc"
ca=$(npm_get cafile)
ca=${ca:-${NODE_EXTRA_CA_CERTS:-}}
secret_args=(--secret "id=npmrc,src=$secrets/npmrc")
if [[ -n $ca && -f $ca ]]; then
  echo "cafile=/run/secrets/npm-ca" >>"$secrets/npmrc"
  secret_args+=(--secret "id=npm-ca,src=$ca")
fi
echo "build-image: podman build -t $tag (base $base)" >&2
podman build --format docker --network host --build-arg "BASE_IMAGE=$base" "${secret_args[@]}" -t "$tag" -f Dockerfile . >&2

echo "$tag"
