#!/usr/bin/env bash
# What idle QPs cost the QPs that work: ib_send_lat 64 B between lab hosts (through the
# routers: express lines off), alone and while QPS idle connected RC QPs (bench/idle_qps.cc)
# sit on the same two routers, for builds A and B on one fresh lab each.
#
#   sudo bash bench/idle_qps_latency.sh BUILD_A BUILD_B [QPS] [REPS]
#
# QPS defaults to 2000 (each router then holds 2000), REPS to 3 runs of each figure; medians.
# A router that looked at the send ring of every QP in RTS on each pass of its loop paid a
# cache miss or two per idle QP; one that looks only at QPs marked posted pays nothing for
# them. docs/PERFORMANCE.md has the latest table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
A=$(realpath "${1:?usage: idle_qps_latency.sh BUILD_A BUILD_B [QPS] [REPS]}")
B=$(realpath "${2:?usage: idle_qps_latency.sh BUILD_A BUILD_B [QPS] [REPS]}")
QPS=${3:-2000}
REPS=${4:-3}
LAB=$ROOT/tools/wharf-lab/wharf-lab
. bench/lib.sh
. bench/lab_perftest.sh
lab_bench_checks idle_qps_latency.sh "$A" "$B"
IDLE=$B/bin/wharf-idle-qps  # BUILD_B's for both (an older build's may lack the two-sided mode)
[[ -x $IDLE ]] || { echo "idle_qps_latency.sh: $B has no wharf-idle-qps" >&2; exit 1; }
lab_bench_work idle-qps-latency
bench_cleanup() { pkill -f "wharf-idle-qps $QPS 600" || true; }

# latency BUILD: REPS lines of "typical p99" (us) of ib_send_lat 64 B from h2 to h1.
latency() {
  for _ in $(seq "$REPS"); do
    echo "$(lab_perftest "$1" 5 ib_send_lat -s 64 -n 5000) $(lab_perftest "$1" 8 ib_send_lat -s 64 -n 5000)"
  done
}
# medians FILE: "typical p99" medians of latency's lines.
medians() { echo "$(awk '{print $1}' "$1" | median) $(awk '{print $2}' "$1" | median)"; }

# scenario BUILD: prints "typical p99 typical_loaded p99_loaded".
scenario() {
  local build=$1 side h
  WHARF_EXPRESS=off "$LAB" up --hosts 2 --wharfd "$build/bin/wharfd" > "$WORK/up.log"
  latency "$build" > "$WORK/alone"
  rm -f "$WORK"/a "$WORK"/b "$WORK"/*.out
  for side in a b; do
    h=h1
    [[ $side == b ]] && h=h2
    WHARF_ROUTER=/run/wharf-lab/$h/wharfd.sock LD_PRELOAD=$build/lib/libibverbs.so.1 \
      "$IDLE" "$QPS" 600 "$WORK" "$side" > "$WORK/$side.out" 2>&1 &
  done
  for _ in $(seq 1200); do
    grep -q ready "$WORK/a.out" 2> /dev/null && grep -q ready "$WORK/b.out" 2> /dev/null && break
    sleep 0.05
  done
  grep -q ready "$WORK/a.out" || { echo "idle_qps_latency.sh: the idle QPs never got ready" >&2; exit 1; }
  sleep 3  # idle means idle: past the routers' parking sweeps
  latency "$build" > "$WORK/loaded"
  bench_cleanup
  wait || true
  "$LAB" down > /dev/null
  echo "$(medians "$WORK/alone") $(medians "$WORK/loaded")"
}

echo "Measuring ($REPS runs of each figure, $QPS idle QPs per router) ..." >&2
read -r at ap al apl <<< "$(scenario "$A")"
read -r bt bp bl bpl <<< "$(scenario "$B")"
echo "| ib_send_lat 64 B between hosts (us, median of $REPS) | typical | p99 | typical, $QPS idle QPs | p99, $QPS idle QPs | typical: idle QPs / alone |"
echo "|---|---|---|---|---|---|"
echo "| A | $at | $ap | $al | $apl | $(awk -v x="$at" -v y="$al" 'BEGIN {printf "%.1f", y / x}') |"
echo "| B | $bt | $bp | $bl | $bpl | $(awk -v x="$bt" -v y="$bl" 'BEGIN {printf "%.1f", y / x}') |"
echo "(A = $A, B = $B; $(date -u +%Y-%m-%dT%H:%MZ))"
