#!/usr/bin/env bash
# Installs the Debian tools the operations tests drive (idempotent; does nothing when they are present):
#   - chromium  → /usr/bin/chromium, the headless browser the dashboard test drives through playwright-core;
#   - prometheus → promtool, which lints the /metrics exposition;
#   - podman, runc and mmdebstrap → the image test builds the Dockerfile and runs the image
#     (test/deploy/image.test.ts, scripts/build-image.sh; runc because crun fails on some hosts' cgroups).
# Usage: bash scripts/install-test-tools.sh   (as root, as on the dev machines and CI; exits 0 when
# apt-get is unavailable so that the tests can skip with their own message).
set -euo pipefail

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
[ ${#need[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
  echo "install-test-tools: cannot install ${need[*]} (needs root and apt-get); the tests that need them will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# An old or missing package list: refresh once, then install.
if ! apt-get install -y --no-install-recommends "${need[@]}" >/tmp/install-test-tools.log 2>&1; then
  apt-get update >>/tmp/install-test-tools.log 2>&1 || true
  apt-get install -y --no-install-recommends "${need[@]}" >>/tmp/install-test-tools.log 2>&1 || {
    echo "install-test-tools: apt-get install ${need[*]} failed (see /tmp/install-test-tools.log)" >&2
    exit 0
  }
fi
# Debian's prometheus package starts the server as a service where systemd runs; the tests need only promtool.
echo "install-test-tools: installed ${need[*]}"
