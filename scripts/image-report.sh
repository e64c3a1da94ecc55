#!/usr/bin/env bash
# Prints what an image built by scripts/build-image.sh weighs and ships, for a check against advisories: its
# size, its layers, the Node version, every Debian package (from dpkg's status file: the image has no dpkg) and
# every npm package, bundled into /app/dist or kept in /app/node_modules (from the SBOM the image ships,
# /app/sbom.cdx.json), each with its version. docs/image-packages.txt is this report for the current image:
#
#   bash scripts/image-report.sh spark-driver-cleaner:dev > docs/image-packages.txt
#
# Runs the image's node (no network) to read them; podman reads scripts/podman/containers.conf unless
# CONTAINERS_CONF is set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
image=${1:?usage: bash scripts/image-report.sh IMAGE}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/podman/containers.conf}
node_in_image() { podman run --rm --network none --health-cmd none --entrypoint node "$image" "$@"; }

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
node_in_image --version
echo
echo "## Debian packages (name version)"
node_in_image -e '
  const stanzas = require("node:fs").readFileSync("/var/lib/dpkg/status", "utf8").split(/\n\n+/);
  const lines = stanzas.map((s) => [/^Package: (.*)$/m.exec(s)?.[1], /^Version: (.*)$/m.exec(s)?.[1]]);
  console.log(lines.filter(([p, v]) => p && v).map(([p, v]) => `${p} ${v}`).sort().join("\n"));'
sbom_section() { # TITLE LOCATION
  echo
  echo "## $1"
  node_in_image -e '
    const { components } = JSON.parse(require("node:fs").readFileSync("/app/sbom.cdx.json", "utf8"));
    const where = (c) => c.properties?.find((p) => p.name === "sdc:location")?.value;
    const name = (c) => (c.group ? `${c.group}/${c.name}` : c.name);
    console.log(components.filter((c) => where(c) === process.argv[1]).map((c) => `${name(c)} ${c.version}`).sort().join("\n"));' \
    "$2"
}
sbom_section "npm packages bundled into /app/dist (name version)" "dist/src (bundled)"
sbom_section "npm packages in /app/node_modules (name version)" "node_modules"
echo
echo "## SBOM"
node_in_image -e '
  const bom = JSON.parse(require("node:fs").readFileSync("/app/sbom.cdx.json", "utf8"));
  console.log(`/app/sbom.cdx.json: ${bom.bomFormat} ${bom.specVersion}, ${bom.components.length} components`);'
