#!/usr/bin/env bash
# Router memory per idle connected QP (issue #18, item 7), two builds side by side:
#
#   sudo bash bench/qp_memory.sh BUILD_A BUILD_B [QPS] [EXPRESS]
#
# For each build, on a fresh two-host wharf-lab each time (so no scenario reuses memory an
# earlier one freed), QPS RC QPs (default 2000) with 16-entry queues (bench/idle_qps.cc):
# - local: in pairs on h1 (one router);
# - remote: QPS on h1 connected one to one to QPS on h2, idle since RTS;
# - remote used: the same after every QP did one 0-byte RDMA WRITE (what a QP keeps once it
#   has worked and then stayed idle for 3 s).
# Each scenario starts measuring once the two routers' link is up and has carried their
# probes (`wharfctl pingmesh show`): the link's buffers (about 120 KB per host link,
# docs/PERFORMANCE.md) are not the QPs', and a run that set them up while the QPs were being
# made would count them as 60 B per QP.
# Per QP, the growth of each router's anonymous resident memory (RssAnon: its own state) and
# of its shared resident memory (RssShmem: the QPs' rings, which it maps from memfds it made
# and shares with the application). For the remote rows, h1's and h2's growth is averaged.
# EXPRESS (on|off, default off): the routers' --express; with it on every QP pair also
# gets an express line (a TCP connection, kernel memory not counted here).
# Prints a Markdown table. Needs root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
A=$(realpath "${1:?usage: qp_memory.sh BUILD_A BUILD_B [QPS] [EXPRESS]}")
B=$(realpath "${2:?usage: qp_memory.sh BUILD_A BUILD_B [QPS] [EXPRESS]}")
QPS=${3:-2000}
EXPRESS=${4:-off}
LAB=$ROOT/tools/wharf-lab/wharf-lab
. bench/lib.sh
lab_bench_checks qp_memory.sh "$A" "$B"
# The measuring tools are BUILD_B's for both (an older build's may lack the two-sided mode).
IDLE=$B/bin/wharf-idle-qps
CTL=$B/bin/wharfctl
[[ -x $IDLE && -x $CTL ]] || { echo "qp_memory.sh: $B has no wharf-idle-qps or wharfctl" >&2; exit 1; }
lab_bench_work qp-memory

# mem_kib PID FIELD: a field of /proc/PID/status in KiB.
mem_kib() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
router_pid() { awk -v h="$1" '$1 == h {for (i = 1; i <= NF; i++) if ($i == "pid") print $(i + 1)}' "$WORK/up.log"; }
wait_ready() {
  for _ in $(seq 1200); do grep -q ready "$1" 2> /dev/null && return 0; sleep 0.05; done
  echo "qp_memory.sh: $1 never got ready" >&2
  cat "$1" >&2
  return 1
}

# wait_link_up: until each router sees the other up (its probes answered over their link).
wait_link_up() {
  local h
  for h in h1 h2; do
    for _ in $(seq 200); do
      "$CTL" -r "/run/wharf-lab/$h/wharfd.sock" pingmesh show 2> /dev/null | grep -q "state up" && continue 2
      sleep 0.05
    done
    echo "qp_memory.sh: the routers' link never came up" >&2
    return 1
  done
}

# scenario BUILD local|remote|used: prints "anon shmem" bytes per QP.
scenario() {
  local build=$1 kind=$2 r1 r2 a1 s1 a2 s2 lib=$1/lib/libibverbs.so.1
  WHARF_EXPRESS=$EXPRESS "$LAB" up --hosts 2 --wharfd "$build/bin/wharfd" > "$WORK/up.log"
  r1=$(router_pid h1)
  r2=$(router_pid h2)
  wait_link_up
  a1=$(mem_kib "$r1" RssAnon) s1=$(mem_kib "$r1" RssShmem)
  a2=$(mem_kib "$r2" RssAnon) s2=$(mem_kib "$r2" RssShmem)
  rm -f "$WORK"/a "$WORK"/b "$WORK"/*.out
  if [[ $kind == local ]]; then
    WHARF_ROUTER=/run/wharf-lab/h1/wharfd.sock LD_PRELOAD=$lib \
      "$IDLE" "$QPS" 60 > "$WORK/a.out" &
    wait_ready "$WORK/a.out"
    awk -v n="$QPS" -v a="$(($(mem_kib "$r1" RssAnon) - a1))" \
      -v s="$(($(mem_kib "$r1" RssShmem) - s1))" 'BEGIN {printf "%d %d\n", a * 1024 / n, s * 1024 / n}'
  else
    local used=""
    [[ $kind == used ]] && used=used
    for side in a b; do
      local h=h1
      [[ $side == b ]] && h=h2
      # shellcheck disable=SC2086
      WHARF_ROUTER=/run/wharf-lab/$h/wharfd.sock LD_PRELOAD=$lib \
        "$IDLE" "$QPS" 60 "$WORK" $side $used > "$WORK/$side.out" &
    done
    wait_ready "$WORK/a.out"
    wait_ready "$WORK/b.out"
    # Idle means idle: past two of the router's once-a-second parking sweeps (a QP quiet
    # through a whole sweep period gives its engine state back, ARCHITECTURE.md).
    sleep 3
    awk -v n="$((2 * QPS))" \
      -v a="$(($(mem_kib "$r1" RssAnon) - a1 + $(mem_kib "$r2" RssAnon) - a2))" \
      -v s="$(($(mem_kib "$r1" RssShmem) - s1 + $(mem_kib "$r2" RssShmem) - s2))" \
      'BEGIN {printf "%d %d\n", a * 1024 / n, s * 1024 / n}'
  fi
  pkill -f "wharf-idle-qps $QPS 60" || true
  wait || true
  "$LAB" down > /dev/null
}

echo "Measuring $QPS QPs per scenario (express $EXPRESS) ..." >&2
echo "| $QPS idle RC QPs, bytes per QP | A: anon | A: shared (rings) | B: anon | B: shared (rings) |"
echo "|---|---|---|---|---|"
for kind in local remote used; do
  read -r aa as <<< "$(scenario "$A" "$kind")"
  read -r ba bs <<< "$(scenario "$B" "$kind")"
  echo "| $kind | $aa | $as | $ba | $bs |"
done
echo "(A = $A, B = $B; $(date -u +%Y-%m-%dT%H:%MZ))"
