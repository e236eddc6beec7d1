#!/usr/bin/env bash
# What a container made by wharf-run is, beyond its network: the device view (/dev/infiniband
# and /sys/class/infiniband agree with what ibv_devinfo answers, the GID's netdev is the
# container's interface, the host's /dev and /sys are untouched), its own hostname, wharf-exec
# into a running container, and names reclaimed from a killed wharf-run (a namespace no
# process uses) while a running container's name is refused.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/container_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# expect LABEL REGEX: LABEL's output has a line matching REGEX (extended).
expect() { grep -qE -- "$2" "$E2E_TMP/$1.out" || e2e_fail "$1 output has no line matching '$2'"; }

e2e_init
e2e_require_command ibv_devinfo ibstat
e2e_start_router
A=$(e2e_name A)
B=$(e2e_name B)
VIP=$(e2e_vip 0)

# The device view, read inside the container.
e2e_run_container view "$A" "$VIP" preload 30 sh -c '
  hostname
  ls -l /dev/infiniband
  for f in node_guid node_type fw_ver ports/1/state ports/1/phys_state ports/1/lid \
           ports/1/link_layer ports/1/rate ports/1/gids/0 ports/1/gid_attrs/types/0 \
           ports/1/gid_attrs/ndevs/0; do
    printf "%s=%s\n" "$f" "$(cat /sys/class/infiniband/wharf0/$f)"
  done
  ls /sys/class/infiniband/wharf0/device/net
  cat /sys/class/infiniband_verbs/uverbs0/ibdev
  ls /sys/class/net
  ibv_devinfo -v -d wharf0
  ibstat wharf0' || e2e_fail "reading the device view failed"
out=$E2E_TMP/view.out
expect view "^$A\$"
grep -qE "^c.* 231, *192 .*uverbs0$" "$out" || e2e_fail "no /dev/infiniband/uverbs0 (231:192)"
grep -qE "^c.* rdma_cm$" "$out" || e2e_fail "no /dev/infiniband/rdma_cm"
expect view "^ports/1/state=4: ACTIVE$"
expect view "^ports/1/link_layer=InfiniBand$"
expect view "^ports/1/gid_attrs/ndevs/0=eth0$"
expect view "^node_type=1: CA$"
# sysfs and the verbs library say the same.
guid=$(sed -n 's/^node_guid=//p' "$out")
grep -qE "node_guid:[[:space:]]+$guid$" "$out" || e2e_fail "node_guid $guid differs from ibv_devinfo's"
lid=$(printf '%d' "$(sed -n 's#^ports/1/lid=##p' "$out")")
grep -qE "port_lid:[[:space:]]+$lid$" "$out" || e2e_fail "LID $lid differs from ibv_devinfo's"
IFS=. read -r a b c d <<<"$VIP"
gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
expect view "^ports/1/gids/0=$gid$"
grep -qE "GID\[ *0\]:[[:space:]]+$gid" "$out" || e2e_fail "GID[0] differs from ibv_devinfo's"
expect view "Rate: 100$"
# The host keeps its own: no /dev/infiniband or wharf0 appeared outside the container.
[[ -e /dev/infiniband/uverbs0 && ! -c /dev/infiniband/uverbs0 ]] && e2e_fail "host /dev changed"
[[ -e /sys/class/infiniband/wharf0 ]] && e2e_fail "the host's /sys/class shows wharf0"

# wharf-exec: a second process in a running container, with its router and libraries.
e2e_start_container sleeper "$A" "$VIP" preload sleep 30
pid=$E2E_LAST_PID
for _ in $(seq 100); do [[ -e /run/wharf/containers/$A ]] && break; sleep 0.1; done
timeout 20 "$E2E_BIN/wharf-exec" "$A" 'hostname; echo WHARF_CONTAINER=$WHARF_CONTAINER;' \
  'ip -br -4 addr show eth0; ibv_devinfo -d wharf0 | grep -c PORT_ACTIVE' >"$E2E_TMP/exec.out" 2>&1 ||
  e2e_fail "wharf-exec failed: $(cat "$E2E_TMP/exec.out")"
expect exec "^$A\$"
expect exec "^WHARF_CONTAINER=$A\$"
expect exec " $VIP/"
expect exec "^1\$"
timeout 10 "$E2E_BIN/wharf-exec" nosuch$$ true 2>"$E2E_TMP/exec-none.out" &&
  e2e_fail "wharf-exec into a container that does not exist succeeded"
expect exec-none "no running container"

# A running container's name is refused, at once.
e2e_run_container dup "$A" "$VIP" preload 20 true && e2e_fail "a second container $A started"
expect dup "already running"
kill "$pid" 2>/dev/null
wait "$pid"

# A namespace left by a killed wharf-run (nobody uses it, no wharf-run owns the name) is
# reclaimed; the same name right after a container stopped is never refused.
ip netns add "wharf-$B" || e2e_fail "ip netns add"
e2e_run_container reclaim "$B" "$VIP" preload 20 true || e2e_fail "reclaiming wharf-$B failed"
expect reclaim "reclaiming network namespace wharf-$B"
for i in 1 2 3 4 5; do
  e2e_run_container "again$i" "$B" "$VIP" preload 20 true || e2e_fail "run $i of $B was refused"
done
ip netns list | grep -q "^wharf-$B\b" && e2e_fail "wharf-$B is left behind"
e2e_log "PASS"
