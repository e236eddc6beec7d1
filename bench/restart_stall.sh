#!/usr/bin/env bash
# What an application sees of a router restart (issue #23, "Performance"): the longest wait
# for a completion of wharf-restart-stall (SENDs of 64 B one at a time between two sessions,
# every operation through the router) when, in each round, the router is killed (SIGKILL) and
# a new one started DEAD_S later on the same socket (as the acceptance check does, 0.5 s),
# and then upgraded in place (wharfd --upgrade). The goals: <= 1 s after a crash and restart,
# <= 50 ms after an upgrade. Prints each round and the medians.
#
#   bash bench/restart_stall.sh [BUILD] [ROUNDS]     # e.g. build 5
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=$(readlink -f "${1:-build}")
ROUNDS=${2:-5}
readonly DEAD_S=0.5
. bench/lib.sh  # median
for f in bin/wharfd bin/wharf-restart-stall lib/libibverbs.so.1; do
  [[ -e $BUILD/$f ]] || { echo "restart_stall.sh: $BUILD has no $f" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/wharf-restart-stall.XXXXXX)
router=
cleanup() {
  [[ -n $router ]] && kill "$router" 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
SOCK=$WORK/wharfd.sock
start_router() {
  "$BUILD/bin/wharfd" --socket "$SOCK" --direct-path off >> "$WORK/wharfd.log" 2>&1 &
  router=$!
  for _ in $(seq 100); do [[ -S $SOCK ]] && return 0; sleep 0.05; done
  echo "restart_stall.sh: wharfd did not start" >&2
  exit 1
}

# longest FROM TO: the longest stall (ms) that began between FROM and TO seconds.
longest() { awk -v a="$1" -v b="$2" '$1 == "stall" && $2 >= a && $2 < b && $3 > m {m = $3} END {print m + 0}' "$WORK/probe.out"; }

crash=() upgrade=()
for ((r = 1; r <= ROUNDS; r++)); do
  start_router
  LD_PRELOAD=$BUILD/lib/libibverbs.so.1 WHARF_ROUTER=$SOCK \
    timeout 60 "$BUILD/bin/wharf-restart-stall" 7 > "$WORK/probe.out" 2>&1 &
  probe=$!
  sleep 2
  kill -KILL "$router"
  wait "$router" 2> /dev/null || true
  sleep "$DEAD_S"
  rm -f "$SOCK"
  start_router
  sleep 2
  "$BUILD/bin/wharfd" --upgrade --socket "$SOCK" > /dev/null
  wait "$probe" || { echo "round $r: the probe failed: $(tail -1 "$WORK/probe.out")" >&2; exit 1; }
  kill "$router"
  wait "$router" 2> /dev/null || true
  router=
  crash+=("$(longest 1.5 3.8)")
  upgrade+=("$(longest 4 7)")
  echo "round $r: crash and restart ($DEAD_S s dead): ${crash[-1]} ms; upgrade: ${upgrade[-1]} ms;" \
    "$(tail -1 "$WORK/probe.out")"
done
echo "median stall after a crash and restart ($DEAD_S s dead): $(printf '%s\n' "${crash[@]}" | median) ms (goal <= 1000)"
echo "median stall after wharfd --upgrade: $(printf '%s\n' "${upgrade[@]}" | median) ms (goal <= 50)"
