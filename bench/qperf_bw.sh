#!/usr/bin/env bash
# A/B of two builds of Wharf between lab hosts, in one run: qperf rc_bw 1 MiB (as the
# engine-latency acceptance check measures it) with build A's routers and library, then build
# B's, alternating ROUNDS times, each round a fresh lab; in every lab also qperf tcp_bw 1 MiB
# between the same two containers, the baseline, and between the two hosts' namespaces, the
# path an express line takes (docs/PERFORMANCE.md, "Why rc_bw / tcp_bw is a coin toss").
# Medians and ratios.
#
#   sudo bash bench/qperf_bw.sh BUILD_A BUILD_B [ROUNDS] [RUNS]    # e.g. build-main build
#
# RUNS (default 2): rc_bw and tcp_bw runs of 2 s per lab. Server in a container on h1
# (198.18.1.11), client on h2. Each build dir needs bin/wharfd, bin/wharf-run and
# lib/libibverbs.so.1 (say which build type in the results). Needs root and qperf.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$(readlink -f "$1")
B=$(readlink -f "$2")
ROUNDS=${3:-3}
RUNS=${4:-2}
LAB=$PWD/tools/wharf-lab/wharf-lab
. bench/lib.sh  # median, lab_bench_checks, lab_bench_work
lab_bench_checks qperf_bw.sh "$A" "$B"
command -v qperf > /dev/null || { echo "qperf_bw.sh: needs qperf" >&2; exit 1; }
stop_server() {
  # shellcheck disable=SC2046  # one pid per word
  kill $(ip netns pids "wharf-qbs$$" 2> /dev/null) 2> /dev/null || true
  pkill -f "qperf -lp 19766" 2> /dev/null || true
}
bench_cleanup() { stop_server; }
lab_bench_work qperf-bw

# qperf's "bw = V unit" lines in GB/s, one per line.
gbs() { awk '/bw *=/ {v = $3; if ($4 == "MB/sec") v /= 1000; print v}'; }

# One lab with BUILD's routers: appends its rc_bw figures to WORK/NAME-rc, tcp_bw to NAME-tcp,
# and tcp_bw between the hosts' namespaces to NAME-hosts.
round() {
  local build=$1 name=$2 out
  "$LAB" up --hosts 2 --wharfd "$build/bin/wharfd" > "$WORK/up.log"
  timeout 120 "$build/bin/wharf-run" --router /run/wharf-lab/h1/wharfd.sock --name "qbs$$" \
    --vip 198.18.1.11 -- qperf -lp 19765 > /dev/null 2>&1 &
  local srv=$!
  # -ws: the client keeps trying to connect until the server listens.
  out=$(timeout 120 "$build/bin/wharf-run" --router /run/wharf-lab/h2/wharfd.sock \
    --name "qbc$$" --vip 198.18.2.12 -- \
    sh -c "for i in \$(seq $RUNS); do qperf -lp 19765 -ws 20 -t 2 -m 1m 198.18.1.11 rc_bw tcp_bw; done" 2>&1)
  echo "$out" | awk '/^rc_bw:/ {f = 1; next} /^tcp_bw:/ {f = 0} f' | gbs >> "$WORK/$name-rc"
  echo "$out" | awk '/^tcp_bw:/ {f = 1; next} /^rc_bw:/ {f = 0} f' | gbs >> "$WORK/$name-tcp"
  ip netns exec wharf-lab-h1 timeout 60 qperf -lp 19766 > /dev/null 2>&1 &
  ip netns exec wharf-lab-h2 sh -c \
    "for i in \$(seq $RUNS); do qperf -lp 19766 -ws 20 -t 2 -m 1m 198.19.0.1 tcp_bw; done" |
    gbs >> "$WORK/$name-hosts"
  stop_server
  wait $srv || true
  "$LAB" down > /dev/null
}

echo "Measuring ($ROUNDS labs of each build, alternating, $RUNS runs each) ..." >&2
for _ in $(seq "$ROUNDS"); do
  round "$A" a
  round "$B" b
done
med() { median < "$WORK/$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b / a}'; }
echo "| qperf 1 MiB, GB/s (median of $((ROUNDS * RUNS))) | A: $A | B: $B | B/A |"
echo "|---|---|---|---|"
echo "| rc_bw | $(med a-rc) | $(med b-rc) | $(ratio "$(med a-rc)" "$(med b-rc)") |"
echo "| tcp_bw (baseline) | $(med a-tcp) | $(med b-tcp) | $(ratio "$(med a-tcp)" "$(med b-tcp)") |"
echo "| tcp_bw between the hosts' namespaces | $(med a-hosts) | $(med b-hosts) | $(ratio "$(med a-hosts)" "$(med b-hosts)") |"
echo "| rc_bw / tcp_bw | $(ratio "$(med a-tcp)" "$(med a-rc)") | $(ratio "$(med b-tcp)" "$(med b-rc)") | |"
echo "| rc_bw / tcp_bw between the hosts | $(ratio "$(med a-hosts)" "$(med a-rc)") | $(ratio "$(med b-hosts)" "$(med b-rc)") | |"
echo "all runs: A rc $(tr '\n' ' ' < "$WORK/a-rc"); B rc $(tr '\n' ' ' < "$WORK/b-rc")" >&2
