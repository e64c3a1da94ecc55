#!/usr/bin/env bash
# Prints what an image built by scripts/build-image.sh weighs and ships, for a check against advisories:
# its size, its layers, the Node version, every Debian package (dpkg-query) and every npm package under
# /app/node_modules, each with its version. docs/image-packages.txt is this report for the current image:
#
#   bash scripts/image-report.sh spark-driver-cleaner:dev > docs/image-packages.txt
#
# Runs the image (no network) to read its package lists; podman reads scripts/podman/containers.conf
# unless CONTAINERS_CONF is set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
image=${1:?usage: bash scripts/image-report.sh IMAGE}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/podman/containers.conf}
run() { podman run --rm --network none --health-cmd none --entrypoint "$1" "$image" "${@:2}"; }

echo "# spark-driver-cleaner image: size, layers and packages"
echo "# Made by: bash scripts/image-report.sh $image"
echo
echo "## Size (uncompressed)"
podman image inspect --format '{{.Size}}' "$image" | awk '{ printf "%d bytes (%.0f MB)\n", $1, $1 / 1e6 }'
echo
echo "## Layers (newest first: size, instruction)"
podman history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$image" |
  sed -e 's|/bin/sh -c #(nop) ||' -e 's|^\([^\t]*\t\)/bin/sh -c |\1RUN |' | cut -c1-140
echo
echo "## Node"
run node --version
echo
echo "## Debian packages (name version)"
run dpkg-query -W -f '${Package} ${Version}\n' | sort
echo
echo "## npm packages in /app/node_modules (name version)"
run node -e '
  const fs = require("node:fs");
  const path = require("node:path");
  const found = new Set();
  const walk = (dir) => {
    if (!fs.existsSync(dir)) return;
    for (const entry of fs.readdirSync(dir)) {
      if (entry.startsWith(".")) continue;
      if (entry.startsWith("@")) {
        walk(path.join(dir, entry));
        continue;
      }
      const manifest = path.join(dir, entry, "package.json");
      if (!fs.existsSync(manifest)) continue;
      const { name, version } = JSON.parse(fs.readFileSync(manifest, "utf8"));
      if (name && version) found.add(`${name} ${version}`);
      walk(path.join(dir, entry, "node_modules"));
    }
  };
  walk("/app/node_modules");
  console.log([...found].sort().join("\n"));'
