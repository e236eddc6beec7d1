#!/usr/bin/env bash
# Head-of-line blocking in the router (issue #18 item 4): `ib_send_lat` 64 B on one QP pair,
# idle and then while another pair moves 1 GiB WRITEs (`ib_write_bw -s 1 GiB`) through the
# same router. Goal: p99 while loaded <= 2x idle. One host, a private router with the direct
# path off, so that both pairs' data passes through the router's thread.
#
#   bash bench/hol.sh [BUILD] [REPS]    # BUILD defaults to build/ (any build type); medians
#
# Needs perftest and about 4 GiB of free memory (the two 1 GiB buffers and their copies).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$(readlink -f "${1:-build}")
REPS=${2:-3}
[[ -x $B/bin/wharfd && -e $B/lib/libibverbs.so.1 ]] || { echo "hol.sh: $B has no wharfd" >&2; exit 1; }
WORK=$(mktemp -d /tmp/wharf-hol.XXXXXX)
export WHARF_ROUTER=$WORK/router.sock
LIB=$B/lib/libibverbs.so.1
ROUTER_PID=
cleanup() {
  pkill -f "ib_write_bw -d wharf0 -s 1073741824 -D 25" 2> /dev/null || true
  [[ -n $ROUTER_PID ]] && kill "$ROUTER_PID" 2> /dev/null && wait "$ROUTER_PID" 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
"$B/bin/wharfd" --socket "$WHARF_ROUTER" --log-level warn --direct-path off &
ROUTER_PID=$!
for _ in $(seq 100); do [[ -S $WHARF_ROUTER ]] && break; sleep 0.05; done

# send_lat PORT: ib_send_lat 64 B between two processes; prints "typical p99" (us).
send_lat() {
  local port=$1
  LD_PRELOAD=$LIB timeout 120 ib_send_lat -d wharf0 -s 64 -n 5000 -p "$port" > "$WORK/srv.log" 2>&1 &
  local srv=$!
  sleep 0.5
  LD_PRELOAD=$LIB timeout 120 ib_send_lat -d wharf0 -s 64 -n 5000 -p "$port" localhost \
    > "$WORK/cli.log" 2>&1 || true
  wait $srv || true
  grep -E '^ *[0-9]+ +[0-9]+ ' "$WORK/cli.log" | tail -1 | awk '{print $5, $8}'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "Measuring ($REPS rounds) ..." >&2
port=19700
for _ in $(seq "$REPS"); do
  port=$((port + 2))
  send_lat "$port" >> "$WORK/idle"
  # The bulk pair: 1 GiB WRITEs for 25 s, long enough to cover the latency run.
  bulk=(ib_write_bw -d wharf0 -s 1073741824 -D 25 -p 1960$((port % 10)))
  LD_PRELOAD=$LIB timeout 60 "${bulk[@]}" > "$WORK/bulk-srv.log" 2>&1 &
  local_srv=$!
  sleep 0.5
  LD_PRELOAD=$LIB timeout 60 "${bulk[@]}" localhost > "$WORK/bulk-cli.log" 2>&1 &
  local_cli=$!
  sleep 6  # registration and the first messages
  send_lat $((port + 1)) >> "$WORK/loaded"
  kill "$local_srv" "$local_cli" 2> /dev/null || true
  wait "$local_srv" "$local_cli" 2> /dev/null || true
done
col() { awk -v c="$2" '{print $c}' "$WORK/$1" | median; }
echo "| ib_send_lat 64 B, median of $REPS (us) | idle | while 1 GiB WRITEs run | loaded/idle |"
echo "|---|---|---|---|"
for c in 1 2; do
  name=$([[ $c == 1 ]] && echo typical || echo p99)
  i=$(col idle "$c")
  l=$(col loaded "$c")
  echo "| $name | $i | $l | $(awk -v a="$i" -v b="$l" 'BEGIN {printf "%.1f", b / a}') |"
done
