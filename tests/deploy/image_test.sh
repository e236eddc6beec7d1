#!/usr/bin/env bash
# deploy/image builds offline with podman (runc, cgroupfs, a private store), and what the
# manifests run in it works: every program the DaemonSet, the orchestrator and etcd start
# answers --help or --version there, wharf-cni answers VERSION, and the DaemonSet's install
# step, run as the manifest says with its host paths mounted, installs our libraries, and a
# wharf-cni and a wharf-oci-hook (with its hooks.d definition) that run on a node with none of
# the libraries they need (a root file system of only a shell and the C library).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"
e2e_init
e2e_require_command podman runc
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$E2E_TMP/image
mkdir -p "$W/host-cni" "$W/host-opt" "$W/host-hooks"
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
  "wharfctl --help" "etcd --version"; do
  # shellcheck disable=SC2086  # cmd is a program and its argument
  in_image --entrypoint "$(cut -d' ' -f1 <<<"$cmd")" "$TAG" ${cmd#* } >"$W/out" 2>&1 ||
    { cat "$W/out" >&2; e2e_fail "$cmd failed in the image"; }
done
# perftest's --help exits 1; its usage text shows that it ran.
in_image --entrypoint ib_write_bw "$TAG" --help >"$W/out" 2>&1
grep -q "^ *Usage:" "$W/out" || { cat "$W/out" >&2; e2e_fail "ib_write_bw does not run in the image"; }
echo '{"cniVersion":"1.0.0"}' | in_image -i -e CNI_COMMAND=VERSION --entrypoint wharf-cni "$TAG" |
  grep -q '"1.0.0"' || e2e_fail "wharf-cni VERSION failed in the image"

# The DaemonSet's install step, as its manifest writes it.
mapfile -t install < <(python3 - "$ROOT/deploy/kubernetes/node/daemonset.yaml" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))['spec']['template']['spec']
c = next(c for c in spec['initContainers'] if c['name'] == 'install')
print('\n'.join(c['command'] + c.get('args', [])))
PY
)
((${#install[@]} >= 1)) || e2e_fail "no install step in the DaemonSet"
host_mounts=(-v "$W/host-cni:/host/opt/cni/bin" -v "$W/host-opt:/host/opt/wharf"
  -v "$W/host-hooks:/host/usr/share/containers/oci/hooks.d")
in_image "${host_mounts[@]}" --entrypoint "${install[0]}" "$TAG" "${install[@]:1}" >/dev/null ||
  e2e_fail "the install step failed"
[[ -x $W/host-cni/wharf-cni ]] || e2e_fail "the install step left no wharf-cni"
[[ -f $W/host-opt/lib/libibverbs.so.1 && -f $W/host-opt/lib/librdmacm.so.1 ]] ||
  e2e_fail "the install step left no libraries"
# A node with nothing but a shell and the C library: the installed wharf-cni still answers.
node=$W/node
mkdir -p "$node/opt/cni/bin"
for f in /bin/sh $(ldd /bin/sh | grep -o '/[^ ]*'); do
  mkdir -p "$node$(dirname "$f")"
  cp -L "$f" "$node$f"
done
cp -a "$W/host-cni/wharf-cni" "$node/opt/cni/bin/"
cp -a "$W/host-opt" "$node/opt/wharf"
echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION timeout 20 chroot "$node" /opt/cni/bin/wharf-cni |
  grep -q '"1.0.0"' || e2e_fail "the installed wharf-cni does not run on a node without its libraries"
# The hook's definition names the installed hook, which runs there too: it finds our
# libibverbs where the definition says, and leaves a container that did not ask alone.
hook=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hook"]["path"])' \
  "$W/host-hooks/wharf.json") || e2e_fail "the install step left no valid hooks.d/wharf.json"
[[ $hook == /opt/wharf/oci-hook/* && -x $node$hook ]] || e2e_fail "the hook's definition names $hook"
mapfile -t hook_args < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["hook"]["args"][1:]))' \
  "$W/host-hooks/wharf.json")
echo '{"id": "c", "bundle": "/nowhere"}' | timeout 20 chroot "$node" "$hook" "${hook_args[@]}" ||
  e2e_fail "the installed wharf-oci-hook does not run on a node without its libraries"
# Installing again (a DaemonSet rollout) replaces the files by renaming, never in place.
before=$(stat -c %i "$W/host-opt/lib/libibverbs.so.1")
in_image "${host_mounts[@]}" --entrypoint "${install[0]}" "$TAG" "${install[@]:1}" >/dev/null ||
  e2e_fail "the second install failed"
[[ $(stat -c %i "$W/host-opt/lib/libibverbs.so.1") != "$before" ]] ||
  e2e_fail "the install step rewrote a library in place"
e2e_log "PASS"
