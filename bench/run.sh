#!/usr/bin/env bash
# Wharf's performance goals (issue #2), each measured as a ratio against its baseline in the
# same run on the same machine: perftest over wharfd against memcpy, UCX and futex figures.
#
#   bash bench/run.sh [REPS]      # REPS runs of each figure (default 3); medians are compared
#
# Builds a Release tree in build-bench/, compiles the reference programs of
# ../shared/baseline (memcpy_bw, pp_shm) there, starts a private wharfd, and prints a
# markdown table (also written to build-bench/bench-results.md). perftest runs on the host
# against the router (the data path is the same as from containers), once with the direct
# intra-host path (the default) and once with every operation through the router
# (--direct-path off). Needs root only for nothing; needs the packages of
# scripts/install-deps.sh plus ucx-utils.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
REPS=${1:-3}
B=$ROOT/build-bench
BASE=$ROOT/../shared/baseline

command -v ucx_perftest > /dev/null || apt-get install -y -qq ucx-utils > /dev/null
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF > /dev/null
cmake --build "$B" -j"$(nproc)" --target wharfd wharf_verbs wharf-idle-qps > /dev/null
g++ -O2 -o "$B/memcpy_bw" "$BASE/memcpy_bw.cpp"
g++ -O2 -pthread -o "$B/pp_shm" "$BASE/pp_shm.cpp"

WORK=$(mktemp -d /tmp/wharf-bench.XXXXXX)
DIRECT=$WORK/direct.sock  # default router
ROUTED=$WORK/routed.sock  # --direct-path off
export WHARF_ROUTER=$DIRECT
LIB=$B/lib/libibverbs.so.1
ROUTER_PID=
ROUTED_PID=
cleanup() {
  for pid in $ROUTER_PID $ROUTED_PID; do kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
"$B/bin/wharfd" --socket "$DIRECT" --log-level warn &
ROUTER_PID=$!
"$B/bin/wharfd" --socket "$ROUTED" --log-level warn --direct-path off &
ROUTED_PID=$!
for _ in $(seq 100); do [[ -S $DIRECT && -S $ROUTED ]] && break; sleep 0.05; done

. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"  # median

# perftest <column> <program and args>: runs server and client over the router, prints the
# requested column of the client's result row (columns counted from 1).
PORT=19500
perftest() {
  local col=$1
  shift
  PORT=$((PORT + 1))
  LD_PRELOAD=$LIB timeout 120 "$@" -d wharf0 -p $PORT > "$WORK/srv.log" 2>&1 &
  local srv=$!
  sleep 0.5
  LD_PRELOAD=$LIB timeout 120 "$@" -d wharf0 -p $PORT localhost > "$WORK/cli.log" 2>&1 || true
  wait $srv || true
  grep -E '^ *[0-9]+ +[0-9]+ ' "$WORK/cli.log" | tail -1 | awk -v c="$col" '{print $c}'
}
ucx() {  # ucx <column> <test> <size> <iters>
  local col=$1 t=$2 s=$3 n=$4
  PORT=$((PORT + 1))
  UCX_TLS=posix,self timeout 60 ucx_perftest -p $PORT -c 1 > /dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  UCX_TLS=posix,self timeout 60 ucx_perftest 127.0.0.1 -p $PORT -c 0 -f -t "$t" -s "$s" -n "$n" 2>&1 |
    grep -E '^ +[0-9]+ ' | tail -1 | awk -v c="$col" '{print $c}'
  wait $srv || true
}
repeat() { for _ in $(seq "$REPS"); do "$@"; done | median; }

echo "Measuring ($REPS runs each) ..." >&2
# perftest reports MB/sec with MB = 2^20 bytes; memcpy_bw reports GB/s (1e9).
w_bw=$(repeat perftest 4 ib_write_bw -s 1048576 -n 5000)
w_bw_gbs=$(awk -v x="$w_bw" 'BEGIN {printf "%.2f", x * 1048576 / 1e9}')
r_bw=$(WHARF_ROUTER=$ROUTED repeat perftest 4 ib_write_bw -s 1048576 -n 5000)
r_bw_gbs=$(awk -v x="$r_bw" 'BEGIN {printf "%.2f", x * 1048576 / 1e9}')
m_bw=$(repeat bash -c "'$B/memcpy_bw' 1048576 5 | sed -E 's/.*median=([0-9.]+).*/\1/'")
w_lat=$(repeat perftest 5 ib_write_lat -s 8 -n 20000)
r_lat=$(WHARF_ROUTER=$ROUTED repeat perftest 5 ib_write_lat -s 8 -n 20000)
u_lat=$(repeat ucx 3 ucp_put_lat 8 100000)
s_rate=$(repeat perftest 5 ib_send_bw -s 64 -n 200000)
r_rate=$(WHARF_ROUTER=$ROUTED repeat perftest 5 ib_send_bw -s 64 -n 200000)
u_rate=$(repeat ucx 8 tag_bw 8 200000)
u_rate_m=$(awk -v x="$u_rate" 'BEGIN {printf "%.3f", x / 1e6}')
e_lat=$(repeat perftest 5 ib_send_lat -e -s 8 -n 5000)
r_e_lat=$(WHARF_ROUTER=$ROUTED repeat perftest 5 ib_send_lat -e -s 8 -n 5000)
# The same with no spinning before the sleep in ibv_get_cq_event: every wait blocks at once.
b_e_lat=$(WHARF_EVENT_SPIN_US=0 repeat perftest 5 ib_send_lat -e -s 8 -n 5000)
f_rtt=$(repeat bash -c "'$B/pp_shm' proc_futex 20000 3 0 1 | sed -E 's/.*median=([0-9.]+).*/\1/'")
f_oneway=$(awk -v x="$f_rtt" 'BEGIN {printf "%.2f", x / 2000}')

# Idle router: CPU time used while 100 connected RC QPs sit idle for 10 s.
LD_PRELOAD=$LIB "$B/bin/wharf-idle-qps" 100 13 > "$WORK/idle.log" &
IDLE=$!
for _ in $(seq 100); do grep -q ready "$WORK/idle.log" 2> /dev/null && break; sleep 0.05; done
sleep 1
ticks() { awk '{print $14 + $15}' "/proc/$ROUTER_PID/stat"; }
t0=$(ticks)
sleep 10
t1=$(ticks)
wait $IDLE || true
idle_pct=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / hz / 10 * 100}')

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
{
  echo "| Goal | Wharf | Baseline (same run) | Ratio | Target | Router only (ratio) |"
  echo "|---|---|---|---|---|---|"
  echo "| ib_write_bw 1 MiB vs single-thread memcpy 1 MiB | ${w_bw_gbs} GB/s | ${m_bw} GB/s | $(ratio "$w_bw_gbs" "$m_bw") | >= 0.8 | ${r_bw_gbs} GB/s ($(ratio "$r_bw_gbs" "$m_bw")) |"
  echo "| ib_write_lat 8 B typical vs UCX posix ucp_put_lat 8 B (p50) | ${w_lat} us | ${u_lat} us | $(ratio "$w_lat" "$u_lat") | <= 2 | ${r_lat} us ($(ratio "$r_lat" "$u_lat")) |"
  echo "| ib_send_bw 64 B message rate vs UCX posix tag_bw 8 B | ${s_rate} Mmsg/s | ${u_rate_m} Mmsg/s | $(ratio "$s_rate" "$u_rate_m") | >= 0.5 | ${r_rate} Mmsg/s ($(ratio "$r_rate" "$u_rate_m")) |"
  echo "| ib_send_lat -e 8 B typical vs one-way futex wake-up (pp_shm RTT/2) | ${e_lat} us | ${f_oneway} us | $(ratio "$e_lat" "$f_oneway") | <= 1.5 | ${r_e_lat} us ($(ratio "$r_e_lat" "$f_oneway")) |"
  echo "| the same, WHARF_EVENT_SPIN_US=0 (ibv_get_cq_event sleeps at once) | ${b_e_lat} us | ${f_oneway} us | $(ratio "$b_e_lat" "$f_oneway") | (<= 1.5) | |"
  echo "| Idle router CPU, 100 idle RC QPs, 10 s | ${idle_pct} % of a core | - | - | < 2 % | |"
} | tee "$B/bench-results.md"
echo "(medians of $REPS runs; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ))"
