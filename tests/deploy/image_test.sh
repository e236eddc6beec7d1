#!/usr/bin/env bash
# deploy/image builds offline with podman (runc, cgroupfs, a private store), and what the
# manifests run in it works: every program the DaemonSet, the orchestrator and etcd start
# answers --help or --version there, wharf-cni answers VERSION, and the DaemonSet's install
# step, run as the manifest says with its host paths mounted, installs wharf-cni and our
# libraries.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"
e2e_init
e2e_require_command podman runc
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$E2E_TMP/image
mkdir -p "$W/host-cni" "$W/host-lib"
export CONTAINERS_CONF=$W/containers.conf
printf '%s\n' '[engine]' 'runtime = "runc"' 'cgroup_manager = "cgroupfs"' 'events_logger = "file"' \
  >"$CONTAINERS_CONF"
STORE="--root $W/root --runroot $W/runroot"
TAG=localhost/wharf:e2e$$
image_cleanup() {
  local rc=$?
  # shellcheck disable=SC2086  # STORE is a list of arguments
  timeout 60 podman $STORE system reset -f >/dev/null 2>&1
  (exit "$rc")
  e2e_cleanup
}
trap image_cleanup EXIT
WHARF_PODMAN_ARGS=$STORE timeout 180 "$ROOT/deploy/image/build.sh" "$E2E_BIN/.." "$TAG" \
  >"$W/build.out" 2>&1 || { cat "$W/build.out" >&2; e2e_fail "deploy/image/build.sh failed"; }
# in_image ARGS...: podman run --rm in the image, for at most 60 s.
in_image() {
  # shellcheck disable=SC2086  # STORE is a list of arguments
  timeout 60 podman $STORE run --rm --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 "$@"
}
for cmd in "wharfd --help" "wharf-device-plugin --help" "wharf-orchestrator --help" \
  "wharfctl --help" "etcd --version" "ib_write_bw --help"; do
  # shellcheck disable=SC2086  # cmd is a program and its argument
  in_image --entrypoint "$(cut -d' ' -f1 <<<"$cmd")" "$TAG" ${cmd#* } >"$W/out" 2>&1 ||
    grep -qi "usage\|options\|version" "$W/out" || { cat "$W/out" >&2; e2e_fail "$cmd failed in the image"; }
done
echo '{"cniVersion":"1.0.0"}' | in_image -i -e CNI_COMMAND=VERSION --entrypoint wharf-cni "$TAG" |
  grep -q '"1.0.0"' || e2e_fail "wharf-cni VERSION failed in the image"

# The DaemonSet's install step, as its manifest writes it.
mapfile -t install < <(python3 - "$ROOT/deploy/kubernetes/node/daemonset.yaml" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))['spec']['template']['spec']
c = next(c for c in spec['initContainers'] if c['name'] == 'install')
print('\n'.join(c['command'] + c['args']))
PY
)
((${#install[@]} >= 2)) || e2e_fail "no install step in the DaemonSet"
in_image -v "$W/host-cni:/host/opt/cni/bin" -v "$W/host-lib:/host/opt/wharf/lib" \
  --entrypoint "${install[0]}" "$TAG" "${install[@]:1}" || e2e_fail "the install step failed"
[[ -x $W/host-cni/wharf-cni ]] || e2e_fail "the install step left no wharf-cni"
[[ -f $W/host-lib/libibverbs.so.1 && -f $W/host-lib/librdmacm.so.1 ]] ||
  e2e_fail "the install step left no libraries"
echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION "$W/host-cni/wharf-cni" | grep -q '"1.0.0"' ||
  e2e_fail "the installed wharf-cni does not run on the host"
e2e_log "PASS"
