#!/usr/bin/env bash
# Builds the container image with podman, without Docker and without pulling from a public registry.
#
#   bash scripts/build-image.sh [--tag NAME]        (default spark-driver-cleaner:dev)
#
# 1. The two bases the Dockerfile pins by digest (scripts/build-base-image.sh: Debian from Debian's packages,
#    Node and npm from the npm registry; made once, then reused while their inputs stay the same). It stops
#    here (exit 3) when the bases it makes are not the pinned ones, naming the packages: docs/image.md,
#    "The bases", says how to review and update the pins.
# 2. `podman build` of the Dockerfile, FROM the pinned digests. npm inside the build reaches the registry the
#    way this machine does: the registry URL, CA file and proxies of the machine's npm configuration go in as
#    build secrets (mounted for the `npm ci` step only, never in a layer), and the build uses the host's network.
# 3. The SBOM shipped in the image (/app/sbom.cdx.json) is copied beside it: dist/image/<NAME>.cdx.json, with
#    `/` and `:` of NAME as `_` (printed on stderr).
#
# scripts/image-report.sh lists the image's size, layers and packages.
# Needs podman, runc and (for the bases) mmdebstrap, which scripts/install-test-tools.sh installs as root,
# and the npm dev dependencies (npm ci). Podman reads scripts/podman/containers.conf unless CONTAINERS_CONF is set.
# Prints the image's name on stdout last; progress goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

tag=spark-driver-cleaner:dev
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# Exit 3 (not the pinned bases) or 1 stops here, with the reason on stderr.
bash scripts/build-base-image.sh >/dev/null

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
echo "build-image: podman build -t $tag" >&2
# --pull=never: the bases are local (step 1); a missing one is an error, not a pull from a registry.
podman build --format docker --network host --pull=never "${secret_args[@]}" -t "$tag" -f Dockerfile . >&2

# The SBOM beside the image.
mkdir -p dist/image
sbom="dist/image/$(tr '/:' '__' <<<"$tag").cdx.json"
ctr=$(podman create --health-cmd none "$tag")
podman cp "$ctr:/app/sbom.cdx.json" "$sbom" >&2
podman rm "$ctr" >/dev/null 2>&1
echo "build-image: SBOM $sbom" >&2

echo "$tag"
