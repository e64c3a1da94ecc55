#!/usr/bin/env bash
# Deployment checks, called by .ci/run; no cluster and no Docker engine needed.
#   1. kubectl >= 1.21 is present (the machine's own, else the `kubectl` package of a configured apt
#      repository); Debian bookworm's kubernetes-client (1.20, kustomize v2.0.3) is too old;
#   2. every kustomization under infra/k8s and test/deploy renders with `kubectl kustomize`, without a warning
#      (every overlay; the components inside the overlays that use them; the example overlay with the
#      monitoring component, test/deploy/with-monitoring), except the GitOps overlay, whose remote base
#      test/deploy/gitops.test.ts renders from a local clone;
#   3. the Dockerfile passes the dockerfile-utils linter;
#   4. the alerting rules (infra/monitoring/alerts.yaml, kube-state-metrics-alerts.yaml) pass `promtool check
#      rules` and their unit tests `promtool test rules test/deploy/alerts.promtool.yaml` (promtool from Debian's
#      prometheus package, which scripts/install-test-tools.sh installs; test/deploy/alerts.test.ts runs both
#      too, so `npm test` does);
#   5. test/deploy (vitest): every rendered object validated against the Kubernetes schemas, the
#      RBAC rules exactly get/list/watch/delete on pods (cluster-scope overlay: list/watch cluster-wide,
#      get/delete per target namespace; namespace-discovery overlay: one ClusterRole, list/watch on
#      namespaces and get/list/watch/delete on pods), the Deployment's required fields, the
#      Dockerfile's base/user/entrypoint, the zone spread, the compose file and collector configuration,
#      the alerts' severities, annotations and runbook links (anchors in docs/troubleshooting.md), the PrometheusRule,
#      the Grafana dashboard and its ConfigMap (equal to the file), and the metric names they use
#      against a running replica (which needs redis-server: scripts/setup.sh installs it); not the
#      image test (test/deploy/image.test.ts: podman builds and runs the image), which `npm test` runs.
# Needs the npm dev dependencies (npm ci). KUBECTL=/path/to/kubectl picks another kubectl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# kubectl 1.14-1.20 embed kustomize v2.0.3, which reads only files from `resources` (not the
# directories the overlay lists) and has no components; 1.21 embeds kustomize v4.0.5.
MIN_KUBECTL_MINOR=21
need_kubectl() {
  echo "check-deploy: $1; install kubectl >= 1.$MIN_KUBECTL_MINOR (https://kubernetes.io/docs/tasks/tools/) or set KUBECTL" >&2
  exit 1
}

kubectl=${KUBECTL:-kubectl}
if ! command -v "$kubectl" >/dev/null 2>&1; then
  # Only a `kubectl` package (pkgs.k8s.io, Google Cloud's apt repository) is recent enough.
  if [[ -z ${KUBECTL:-} && $(id -u) -eq 0 ]] &&
    apt-cache policy kubectl 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then
    echo "check-deploy: $kubectl not found; installing the kubectl package"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubectl >/dev/null ||
      need_kubectl "apt-get install kubectl failed"
    kubectl=kubectl
  else
    need_kubectl "$kubectl not found"
  fi
fi
minor=$("$kubectl" version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -n 1)
[[ -n $minor ]] || need_kubectl "cannot read the version of $kubectl"
((minor >= MIN_KUBECTL_MINOR)) || need_kubectl "$kubectl is 1.$minor"
export KUBECTL="$kubectl"
echo "check-deploy: $("$kubectl" version --client 2>/dev/null | tr '\n' ' ')"

[[ -x node_modules/.bin/vitest ]] || npm ci --no-audit --no-fund
# The project's Node 24 (the `node` dev dependency) before the system's older one.
export PATH="$PWD/node_modules/.bin:$PATH"

status=0
# Every kustomization of the repository (infra/k8s, test/deploy), found rather than listed so that none is
# forgotten; not the components (kind: Component: rendered inside the overlays that use them) nor one with a
# remote base (infra/k8s/overlays/gitops: it names github.com; test/deploy/gitops.test.ts renders it from a
# local clone at the release tag).
dirs=()
while IFS= read -r file; do
  grep -q '^kind: Component' "$file" && continue
  grep -Eq '^\s*-\s*https?://' "$file" && { echo "check-deploy: $(dirname "$file") has a remote base: rendered by test/deploy/gitops.test.ts"; continue; }
  dirs+=("$(dirname "$file")")
done < <(find infra/k8s test/deploy -name kustomization.yaml | sort)
for dir in "${dirs[@]}"; do
  err=$(mktemp)
  if out=$("$kubectl" kustomize "$dir" 2>"$err"); then
    echo "check-deploy: $dir renders $(grep -c '^kind:' <<<"$out") objects"
    # A warning names a deprecated field (`bases`, `patchesStrategicMerge`…) a later kustomize drops.
    if [[ -s $err ]]; then
      echo "check-deploy: kubectl kustomize $dir warned:" >&2
      cat "$err" >&2
      status=1
    fi
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

command -v promtool >/dev/null 2>&1 || bash scripts/install-test-tools.sh
if ! command -v promtool >/dev/null 2>&1; then
  echo "check-deploy: promtool not found: install Debian's prometheus package (scripts/install-test-tools.sh)" >&2
  status=1
elif promtool check rules infra/monitoring/alerts.yaml infra/monitoring/kube-state-metrics-alerts.yaml &&
  promtool test rules test/deploy/alerts.promtool.yaml; then
  echo "check-deploy: alerting rules ok ($(promtool --version 2>&1 | head -n 1))"
else
  echo "check-deploy: alerting rules failed (infra/monitoring/*alerts.yaml, test/deploy/alerts.promtool.yaml)" >&2
  status=1
fi

# .ci/run sets SKIP_DEPLOY_TESTS: its full test run (npm test) includes test/deploy already. The image
# test (a podman build, minutes on a cold cache) runs there, not here.
if [[ -z ${SKIP_DEPLOY_TESTS:-} ]]; then
  vitest run test/deploy --exclude test/deploy/image.test.ts || status=1
fi
exit "$status"
