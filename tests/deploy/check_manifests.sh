#!/usr/bin/env bash
# deploy/kubernetes checked offline: yamllint (deploy/kubernetes/.yamllint), the schema and
# consistency checker beside this file, and `kubectl kustomize` of each kustomization when
# kubectl is installed (it builds offline; applying would need a cluster). And
# deploy/systemd's unit with `systemd-analyze verify` (its ExecStart pointed at an existing
# program: the unit names where an operator installs wharfd).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
K=$ROOT/deploy/kubernetes
rc=0
if command -v yamllint >/dev/null; then
  yamllint -s -c "$K/.yamllint" "$K" || rc=1
else
  echo "yamllint is not installed (scripts/install-deps.sh installs it)"
  rc=1
fi
python3 "$ROOT/tests/deploy/check_manifests.py" "$ROOT" || rc=1
if command -v kubectl >/dev/null; then
  for k in "$K" "$K/orchestrator" "$K/examples"; do
    kubectl kustomize "$k" >/dev/null || { echo "kubectl kustomize $k failed"; rc=1; }
  done
else
  echo "kubectl is not installed: kustomize builds not checked"
fi
if command -v systemd-analyze >/dev/null; then
  unit_dir=$(mktemp -d)
  sed 's|^ExecStart=[^ ]*|ExecStart=/bin/true|' "$ROOT/deploy/systemd/wharfd.service" \
    >"$unit_dir/wharfd.service"
  # It exits 0 on unknown keys and bad values too, so anything it says is a finding.
  findings=$(systemd-analyze verify "$unit_dir/wharfd.service" 2>&1) || findings+=" (failed)"
  if [[ -n $findings ]]; then
    echo "deploy/systemd/wharfd.service: $findings"
    rc=1
  fi
  rm -rf "$unit_dir"
else
  echo "systemd-analyze is not installed: deploy/systemd not checked"
fi
exit "$rc"
