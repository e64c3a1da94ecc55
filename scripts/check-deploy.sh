#!/usr/bin/env bash
# Deployment checks (issue 6), called by .ci/run; no cluster and no Docker engine needed.
#   1. kubectl is present: the machine's own, else Debian's kubernetes-client is installed;
#   2. every kustomization under infra/k8s renders with `kubectl kustomize`;
#   3. the Dockerfile passes the dockerfile-utils linter;
#   4. test/deploy (vitest): every rendered object validated against the Kubernetes schemas, the
#      RBAC rules exactly get/list/watch/delete on pods, the Deployment's required fields, the
#      Dockerfile's base/user/entrypoint, the compose file and collector configuration.
# Needs the npm dev dependencies (npm ci). KUBECTL=/path/to/kubectl picks another kubectl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kubectl=${KUBECTL:-kubectl}
if ! command -v "$kubectl" >/dev/null 2>&1; then
  echo "check-deploy: $kubectl not found; installing Debian's kubernetes-client"
  if [[ $(id -u) -ne 0 ]]; then
    echo "check-deploy: need root for apt-get (or set KUBECTL)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq kubernetes-client >/dev/null || { apt-get update -qq && apt-get install -y -qq kubernetes-client >/dev/null; }
  kubectl=kubectl
fi
export KUBECTL="$kubectl"
echo "check-deploy: $("$kubectl" version --client 2>/dev/null | tr '\n' ' ')"

[[ -x node_modules/.bin/vitest ]] || npm ci --no-audit --no-fund
# The project's Node 24 (the `node` dev dependency) before the system's older one.
export PATH="$PWD/node_modules/.bin:$PATH"

status=0
for dir in infra/k8s/base infra/k8s/backends infra/k8s/overlays/example; do
  err=$(mktemp)
  if out=$("$kubectl" kustomize "$dir" 2>"$err"); then
    echo "check-deploy: $dir renders $(grep -c '^kind:' <<<"$out") objects"
    # kustomize v5 warns that `bases` is deprecated: kept on purpose for kubectl 1.20 (see the overlay).
    grep -v "'bases' is deprecated" "$err" >&2 || true
  else
    echo "check-deploy: kubectl kustomize $dir failed:" >&2
    cat "$err" >&2
    status=1
  fi
  rm -f "$err"
done

if dockerfile-utils lint Dockerfile; then
  echo "check-deploy: Dockerfile lint ok ($(dockerfile-utils --version))"
else
  status=1
fi

# .ci/run sets SKIP_DEPLOY_TESTS: its full test run (npm test) includes test/deploy already.
if [[ -z ${SKIP_DEPLOY_TESTS:-} ]]; then
  vitest run test/deploy || status=1
fi
exit "$status"
