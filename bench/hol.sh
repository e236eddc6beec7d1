#!/usr/bin/env bash
# Head-of-line blocking in the router (issue #18 item 4): `ib_send_lat` 64 B on one QP pair,
# idle and then while another pair moves 1 GiB RDMA WRITEs through the same router
# (`wharf-flows --qps 1 --size 1GiB`, one process driving both ends). Goal: p99 while loaded
# <= 2x idle. One host, a private router with the direct path off, so that both pairs' data
# passes through the router's thread. (perftest's own ib_write_bw would add two spinning
# processes, and on a 2-core machine the scheduler's time slices would swamp the figure.)
#
# Control operations must not wait behind data either: the time to make, connect (INIT, RTR,
# RTS) and destroy 200 RC QPs (`wharf-idle-qps 200 0`, about 1,000 requests to the router,
# each waiting for its reply), idle and while the WRITEs run.
#
#   bash bench/hol.sh [BUILD] [REPS]    # BUILD defaults to build/ (any build type); medians
#
# Needs perftest and about 4 GiB of free memory (the two 1 GiB buffers and their copies).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$(readlink -f "${1:-build}")
REPS=${2:-3}
[[ -x $B/bin/wharfd && -e $B/lib/libibverbs.so.1 ]] || { echo "hol.sh: $B has no wharfd" >&2; exit 1; }
FLOWS=$(readlink -f "${FLOWS:-build/bin/wharf-flows}")  # any build's: it links Debian's libibverbs
[[ -x $FLOWS ]] || { echo "hol.sh: no $FLOWS (cmake --build build --target wharf-flows)" >&2; exit 1; }
IDLE=$(readlink -f "${IDLE:-build/bin/wharf-idle-qps}")  # likewise any build's
[[ -x $IDLE ]] || { echo "hol.sh: no $IDLE (cmake --build build --target wharf-idle-qps)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/wharf-hol.XXXXXX)
export WHARF_ROUTER=$WORK/router.sock
LIB=$B/lib/libibverbs.so.1
ROUTER_PID=
cleanup() {
  [[ -n $ROUTER_PID ]] && kill "$ROUTER_PID" 2> /dev/null && wait "$ROUTER_PID" 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
"$B/bin/wharfd" --socket "$WHARF_ROUTER" --log-level warn --direct-path off &
ROUTER_PID=$!
for _ in $(seq 100); do [[ -S $WHARF_ROUTER ]] && break; sleep 0.05; done

# send_lat PORT: ib_send_lat 64 B between two processes; prints "typical p99 max" (us).
send_lat() {
  local port=$1
  LD_PRELOAD=$LIB timeout 120 ib_send_lat -d wharf0 -s 64 -n 20000 -p "$port" > "$WORK/srv.log" 2>&1 &
  local srv=$!
  sleep 0.5
  LD_PRELOAD=$LIB timeout 120 ib_send_lat -d wharf0 -s 64 -n 20000 -p "$port" localhost \
    > "$WORK/cli.log" 2>&1 || true
  wait $srv || true
  grep -E '^ *[0-9]+ +[0-9]+ ' "$WORK/cli.log" | tail -1 | awk '{print $5, $8, $4}'
}

# qp_churn_ms: milliseconds to make, connect and destroy 200 RC QPs.
qp_churn_ms() {
  local t0 t1
  t0=$(date +%s%N)
  LD_PRELOAD=$LIB timeout 60 "$IDLE" 200 0 > /dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}

. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"  # median

echo "Measuring ($REPS rounds) ..." >&2
port=19700
for _ in $(seq "$REPS"); do
  port=$((port + 2))
  send_lat "$port" >> "$WORK/idle"
  qp_churn_ms >> "$WORK/churn_idle"
  # The bulk pair: 1 GiB WRITEs, counted for 5 s after a second of warm-up. Registering its
  # buffers takes several seconds; the latency run starts 2 s after the flow says it runs and
  # takes well under a second.
  LD_PRELOAD=$LIB timeout 60 "$FLOWS" --from "$WHARF_ROUTER" --to "$WHARF_ROUTER" --qps 1 \
    --size 1073741824 --seconds 5 --op write > "$WORK/bulk.log" 2>&1 &
  bulk=$!
  for _ in $(seq 300); do grep -q running "$WORK/bulk.log" && break; sleep 0.1; done
  sleep 2
  send_lat $((port + 1)) >> "$WORK/loaded"
  qp_churn_ms >> "$WORK/churn_loaded"
  wait "$bulk" || true
  sed -n 's/.*aggregate_gbps=\([0-9.]*\).*/\1/p' "$WORK/bulk.log" >> "$WORK/bulk_gbps"
done
col() { awk -v c="$2" '{print $c}' "$WORK/$1" | median; }
echo "| ib_send_lat 64 B, median of $REPS (us) | idle | while 1 GiB WRITEs run | loaded/idle |"
echo "|---|---|---|---|"
names=(typical p99 max)
for c in 1 2 3; do
  name=${names[$((c - 1))]}
  i=$(col idle "$c")
  l=$(col loaded "$c")
  echo "| $name | $i | $l | $(awk -v a="$i" -v b="$l" 'BEGIN {printf "%.1f", b / a}') |"
done
ci=$(median < "$WORK/churn_idle")
cl=$(median < "$WORK/churn_loaded")
echo "| make, connect and destroy 200 QPs (ms) | $ci | $cl | $(awk -v a="$ci" -v b="$cl" 'BEGIN {printf "%.1f", b / a}') |"
echo "The bulk flow moved $(median < "$WORK/bulk_gbps") Gbit/s (median) meanwhile."
