#!/usr/bin/env bash
# Two containers under a real runtime: podman 4.3 (Debian) with runc, its CNI backend running
# Debian's bridge + host-local chained with wharf-cni, and an image built locally (no registry)
# from this host's ib_write_bw, rping and ibv_devinfo. Each container gets what
# wharf-device-plugin's Allocate gives a pod (the router's socket, our libraries, the device
# nodes, the environment); ibv_devinfo shows the pod IP in GID[0]; ib_write_bw and rping -V run
# between the containers by their pod IPs; removing them releases their registrations
# (wharf-cni DEL).
#
#   podman_test.sh local   both containers on one host, with a router of the test's own
#   podman_test.sh lab     server on wharf-lab host h1, client on h2 (podman run in each lab
#                          host's namespace, on its bridge wharfbr0, with its router)
#
# This machine's podman needs (docs/OPERATIONS.md, "podman"): runc, not crun (crun refuses
# hybrid cgroups); cgroup_manager "cgroupfs" (no systemd); explicit --ulimit (no
# CAP_SYS_RESOURCE to raise podman's defaults). Everything podman stores is under a private
# --root/--runroot, removed at exit.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
MODE=${1:-local}
[[ $MODE == local || $MODE == lab ]] || { echo "usage: $0 local|lab" >&2; exit 2; }
e2e_init
e2e_require_command podman runc ib_write_bw rping ibv_devinfo ldd
CNI_PLUGINS=/usr/lib/cni
[[ -x $CNI_PLUGINS/bridge ]] || e2e_fail "no $CNI_PLUGINS/bridge: apt-get install containernetworking-plugins"
[[ -x $E2E_BIN/wharf-cni ]] || e2e_fail "$E2E_BIN/wharf-cni is missing (build target wharf-cni)"
LIB=$(cd "$E2E_BIN/../lib" && pwd)

W=$E2E_TMP/podman
IMAGE=localhost/wharf-e2e:$$
mkdir -p "$W/image/rootfs" "$W/dev" "$W/run"
# Per host K (1, and 2 in the lab): the namespace podman runs in, the router's socket
# directory (mounted into the containers as /run/wharf), and the CNI network's bridge and
# subnet.
declare -A NETNS_EXEC SOCK_DIR BRIDGE SUBNET RANGE
if [[ $MODE == local ]]; then
  HOSTS=(1)
  NETNS_EXEC[1]="" SOCK_DIR[1]=$W/run BRIDGE[1]=wpm$$ SUBNET[1]=198.18.9.0/24 RANGE[1]=""
else
  HOSTS=(1 2)
  e2e_use_lab
  for k in "${HOSTS[@]}"; do
    # The lab host's own container bridge and subnet, above wharf-run's addresses. nsenter,
    # not `ip netns exec`, which mounts a sysfs without the cgroup hierarchy runc needs.
    NETNS_EXEC[$k]="nsenter --net=/run/netns/wharf-lab-h$k" SOCK_DIR[$k]=/run/wharf-lab/h$k
    BRIDGE[$k]=wharfbr0 SUBNET[$k]=198.18.$k.0/24
    RANGE[$k]=", \"rangeStart\": \"198.18.$k.200\", \"rangeEnd\": \"198.18.$k.250\""
  done
fi
# pm K ARGS...: podman as host K runs it (its own store, as each host has), for at most 120 s.
pm() {
  local k=$1
  shift
  # shellcheck disable=SC2086  # NETNS_EXEC is a command prefix, meant to be split
  timeout 120 ${NETNS_EXEC[$k]} env CONTAINERS_CONF="$W/h$k.conf" podman --root "$W/root-h$k" \
    --runroot "$W/runroot-h$k" --hooks-dir "$W/hooks-h$k" "$@"
}
podman_cleanup() {
  local rc=$?
  for k in "${HOSTS[@]}"; do pm "$k" rm -af -t 2 >/dev/null 2>&1; done
  for k in "${HOSTS[@]}"; do pm "$k" system reset -f >/dev/null 2>&1; done
  local finish=e2e_cleanup  # with the test's status in $?, as both expect
  if [[ $MODE == lab ]]; then finish=_e2e_lab_finish; else ip link del "${BRIDGE[1]}" 2>/dev/null; fi
  (exit "$rc")
  "$finish"
}
trap podman_cleanup EXIT

if [[ $MODE == local ]]; then
  # The router's socket lives in a directory of its own, mounted into the containers.
  E2E_TMP_SAVED=$E2E_TMP
  E2E_TMP=$W/run
  e2e_start_router
  E2E_TMP=$E2E_TMP_SAVED
else
  timeout 60 "$E2E_LAB" up --hosts 2 --wharfd "$E2E_WHARFD" >"$E2E_TMP/lab.out" 2>&1 ||
    e2e_fail "wharf-lab up: $(tail -1 "$E2E_TMP/lab.out")"
fi

for k in "${HOSTS[@]}"; do
  mkdir -p "$W/net.d-h$k"
  printf '%s\n' '[engine]' 'runtime = "runc"' 'cgroup_manager = "cgroupfs"' 'events_logger = "file"' \
    '[network]' 'network_backend = "cni"' "cni_plugin_dirs = [\"$CNI_PLUGINS\", \"$E2E_BIN\"]" \
    "network_config_dir = \"$W/net.d-h$k\"" >"$W/h$k.conf"
  printf '%s\n' '{"cniVersion": "1.0.0", "name": "wpods", "plugins": [' \
    "  {\"type\": \"bridge\", \"bridge\": \"${BRIDGE[$k]}\", \"isGateway\": true," \
    "   \"ipam\": {\"type\": \"host-local\", \"subnet\": \"${SUBNET[$k]}\"${RANGE[$k]}," \
    "    \"routes\": [{\"dst\": \"0.0.0.0/0\"}], \"dataDir\": \"$W/ipam-h$k\"}}," \
    "  {\"type\": \"wharf-cni\", \"router\": \"${SOCK_DIR[$k]}/wharfd.sock\", \"tenant\": \"t1\"," \
    "   \"subnet\": \"${SUBNET[$k]}\"}]}" >"$W/net.d-h$k/wpods.conflist"
done

# The image: the programs, the shared libraries they and our libraries load, nothing else.
rootfs=$W/image/rootfs
copy_with_libs() {
  local f lib
  for f in "$@"; do
    mkdir -p "$rootfs$(dirname "$f")"
    cp -L "$f" "$rootfs$f"
    for lib in $(ldd "$f" | grep -o '/[^ ]*'); do
      mkdir -p "$rootfs$(dirname "$lib")"
      cp -Ln "$lib" "$rootfs$lib"
    done
  done
}
copy_with_libs "$(command -v sh)" "$(command -v ib_write_bw)" "$(command -v rping)" \
  "$(command -v ibv_devinfo)" "$LIB/libibverbs.so.1"
rm -r "${rootfs:?}${LIB:?}"  # our libraries come from the mount, as in a pod
printf 'FROM scratch\nCOPY rootfs/ /\n' >"$W/image/Containerfile"
for k in "${HOSTS[@]}"; do
  pm "$k" build -q -t "$IMAGE" "$W/image" >"$W/build.out" 2>&1 ||
    { cat "$W/build.out" >&2; e2e_fail "podman build failed"; }
done

# What wharf-device-plugin's Allocate gives a container.
mknod -m 666 "$W/dev/uverbs0" c 231 192
mknod -m 666 "$W/dev/rdma_cm" c 10 58
# The sysfs view comes from wharf-oci-hook, which podman runs for containers annotated
# io.wharf.device-view=true (as the plugin's Allocate annotates them), with the host's router.
for k in "${HOSTS[@]}"; do
  mkdir -p "$W/hooks-h$k"
  printf '{"version": "1.0.0", "hook": {"path": "%s", "args": ["wharf-oci-hook", "--router", "%s"], "timeout": 10}, "when": {"annotations": {"%s": "^true$"}}, "stages": ["createContainer"]}\n' \
    "$E2E_BIN/wharf-oci-hook" "${SOCK_DIR[$k]}/wharfd.sock" '^io\\.wharf\\.device-view$' \
    >"$W/hooks-h$k/wharf.json"
done
# start K NAME CMD...: a detached container on host K.
start() {
  local k=$1 name=$2
  shift 2
  pm "$k" run -d --name "$name" --network wpods --annotation io.wharf.device-view=true \
    --ulimit nofile=1024:1024 \
    --ulimit nproc=4096:4096 -v "$LIB:/opt/wharf/lib:ro" -v "${SOCK_DIR[$k]}:/run/wharf:ro" \
    --device "$W/dev/uverbs0:/dev/infiniband/uverbs0" \
    --device "$W/dev/rdma_cm:/dev/infiniband/rdma_cm" -e WHARF_ROUTER=/run/wharf/wharfd.sock \
    -e LD_PRELOAD=/opt/wharf/lib/libibverbs.so.1:/opt/wharf/lib/librdmacm.so.1 \
    "$IMAGE" "$@" >/dev/null || e2e_fail "podman run $name on host $k failed"
}
# server_ip K NAME: the pod IP of a running container.
server_ip() {
  local ip
  ip=$(pm "$1" inspect -f '{{.NetworkSettings.Networks.wpods.IPAddress}}' "$2")
  [[ -n $ip ]] || e2e_fail "container $2 has no pod IP (has it exited?)"
  echo "$ip"
}
# listening K NAME WHAT CHECK...: waits up to 20 s until CHECK succeeds for the running
# container NAME on host K (ib_write_bw's TCP port open in its namespace; rping's rdma_cm id
# listening at the router), so that the client never starts too early.
listening() {
  local k=$1 name=$2 what=$3 i
  shift 3
  for ((i = 0; i < 200; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  e2e_fail "container $name on host $k did not start listening ($what) within 20 s"
}
tcp_port_open() {  # K NAME PORT
  local netns
  netns=$(pm "$1" inspect -f '{{.NetworkSettings.SandboxKey}}' "$2") || return 1
  [[ -n $netns ]] && nsenter --net="$netns" ss -Hltn "sport = :$3" | grep -q .
}
cm_listening() {  # K
  "$E2E_BIN/wharfctl" -r "${SOCK_DIR[$1]}/wharfd.sock" resource show cm_id 2>/dev/null |
    grep -q "state LISTEN"
}
# finish K NAME: true when it exits 0 within 120 s; its output is kept for the log.
finish() {
  local status
  status=$(pm "$1" wait "$2") || status=timeout
  pm "$1" logs "$2" >"$W/$2.out" 2>&1
  E2E_LOGS+=("$2:$W/$2.out")
  [[ $status == 0 ]]
}
SRV=1 CLI=${HOSTS[-1]}

# The container has gone when its output is read: its address is the subnet's, from GID[0],
# and the sysfs view agrees with ibv_devinfo (GID[0], its netdev, the port's state).
# shellcheck disable=SC2016  # the container's shell expands it
start "$SRV" devinfo sh -c 'ibv_devinfo -v && p=/sys/class/infiniband/wharf0/ports/1 &&
  read -r g <$p/gids/0 && read -r n <$p/gid_attrs/ndevs/0 && read -r s <$p/state &&
  echo "sysfs: gid0 $g ndev0 $n state $s"'
finish "$SRV" devinfo || e2e_fail "ibv_devinfo or the sysfs view failed"
read -r -a octets <<<"${SUBNET[$SRV]//./ }"
gid_prefix="ffff:$(printf '%02x%02x:%02x' "${octets[@]:0:3}")"
grep -q "GID\[ *0\]:.*$gid_prefix" "$W/devinfo.out" ||
  e2e_fail "ibv_devinfo in a container does not show a pod IP of ${SUBNET[$SRV]} in GID[0]"
grep -qE "^sysfs: gid0 .*$gid_prefix.* ndev0 eth0 state 4: ACTIVE$" "$W/devinfo.out" ||
  e2e_fail "the container's sysfs view disagrees with ibv_devinfo: $(grep '^sysfs' "$W/devinfo.out")"

start "$SRV" bw-server ib_write_bw -d wharf0 -D 2
listening "$SRV" bw-server "TCP port 18515" tcp_port_open "$SRV" bw-server 18515
start "$CLI" bw-client ib_write_bw -d wharf0 -D 2 "$(server_ip "$SRV" bw-server)"
finish "$CLI" bw-client || e2e_fail "ib_write_bw client failed"
finish "$SRV" bw-server || e2e_fail "ib_write_bw server failed"
grep -qE '^ *65536 +[0-9]+' "$W/bw-client.out" || e2e_fail "ib_write_bw printed no result"

start "$SRV" rping-server rping -s -C 20 -V
listening "$SRV" rping-server "an rdma_cm id" cm_listening "$SRV"
start "$CLI" rping-client rping -c -a "$(server_ip "$SRV" rping-server)" -C 20 -V
finish "$CLI" rping-client || e2e_fail "rping client failed"
finish "$SRV" rping-server || e2e_fail "rping server failed"

# Removing the containers runs the chain's DEL: the router holds none of them any more.
for k in "${HOSTS[@]}"; do pm "$k" rm -a >/dev/null || e2e_fail "podman rm failed"; done
if [[ $MODE == local ]]; then logs=("$W/run/wharfd.log"); else logs=(/run/wharf-lab/h*/wharfd.log); fi
released=$(cat "${logs[@]}" | grep -c "of sandbox .* released")
[[ $released == 5 ]] || e2e_fail "the routers released $released of the 5 containers' registrations"
e2e_log "PASS"
