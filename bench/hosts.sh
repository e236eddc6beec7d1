#!/usr/bin/env bash
# Wharf between hosts (issue #3), each figure a ratio against its baseline in the same run:
# a wharf-lab with two hosts (network namespaces behind a switch), Wharf's routers carrying
# RDMA over their shared TCP connections, against TCP itself over the same link.
#
#   sudo bash bench/hosts.sh [REPS]    # REPS runs of each figure (default 3); medians
#
# Builds a Release tree in build-bench/, refuses to run while another lab is up, and prints a
# markdown table (also build-bench/hosts-results.md):
# - ib_write_bw 1 MiB between containers on h1 and h2 vs iperf3, one stream, h1 <-> h2;
# - ib_write_lat 64 B vs a busy-polling TCP ping-pong of 64 B (bench/tcp_pingpong.cc);
# - 512 concurrent RC flows (bench/flows.cc): Jain's fairness index;
# - aggregate throughput with 1, 64, 512 and 4096 QPs, each against the 1-QP figure;
# - 8 SEND flows with and without a 9th whose receiver posts nothing (fault (d));
# - the router's resident memory per QP and per peer host.
# Needs root (namespaces) and the packages of scripts/install-deps.sh plus iperf3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
REPS=${1:-3}
B=$ROOT/build-bench
LAB=$ROOT/tools/wharf-lab/wharf-lab
. bench/lib.sh  # median, lab_bench_checks, lab_bench_work
lab_bench_checks hosts.sh
command -v iperf3 > /dev/null || apt-get install -y -qq iperf3 > /dev/null
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF > /dev/null
cmake --build "$B" -j"$(nproc)" --target wharfd wharf_verbs wharf-run wharf-flows \
  wharf-tcp-pingpong wharf-idle-qps > /dev/null

bench_cleanup() {
  for n in lpA$$ lpB$$; do "$B/bin/wharf-run" --cleanup "$n" > /dev/null 2>&1 || true; done
}
lab_bench_work hosts-bench
# Three hosts: h1 and h2 carry the traffic; h3 stays untouched until the per-peer memory
# measurement.
"$LAB" up --hosts 3 --wharfd "$B/bin/wharfd" > "$WORK/up.log"
H1=/run/wharf-lab/h1/wharfd.sock
H2=/run/wharf-lab/h2/wharfd.sock
H1_ADDR=198.19.0.1  # h1's address on the link the routers use (wharf-lab's underlay)
LIB=$B/lib/libibverbs.so.1

repeat() { for _ in $(seq "$REPS"); do "$@"; done | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

# perftest COLUMN PROGRAM ARGS...: bench/lab_perftest.sh with this script's build.
. "$ROOT/bench/lab_perftest.sh"
perftest() { lab_perftest "$B" "$@"; }
iperf() {  # Gbit/s of one iperf3 stream h2 -> h1 for 5 s
  ip netns exec wharf-lab-h1 iperf3 -s -1 -B "$H1_ADDR" -p 5301 > /dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  ip netns exec wharf-lab-h2 iperf3 -c "$H1_ADDR" -p 5301 -t 5 -J |
    python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))'
  wait $srv || true
}
tcp_pingpong() {  # typical one-way us of 64 B
  ip netns exec wharf-lab-h1 "$B/bin/wharf-tcp-pingpong" server "$H1_ADDR" 5302 64 &
  local srv=$!
  sleep 0.3
  ip netns exec wharf-lab-h2 "$B/bin/wharf-tcp-pingpong" client "$H1_ADDR" 5302 64 20000 |
    sed -E 's/.*typical_us=([0-9.]+).*/\1/'
  wait $srv || true
}
flows() {  # flows FIELD ARGS...: one field of wharf-flows' line (h1 -> h2)
  local field=$1
  shift
  LD_PRELOAD=$LIB timeout 120 "$B/bin/wharf-flows" --from "$H1" --to "$H2" --seconds 4 "$@" |
    sed -E "s/.*$field=([0-9.]+).*/\1/"
}
# rss_kib PID: resident memory of a process.
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

echo "Measuring ($REPS runs each) ..." >&2
# perftest reports MB/sec with MB = 2^20 bytes.
w_bw=$(repeat perftest 4 ib_write_bw -d wharf0 -s 1048576 -n 3000)
w_gbps=$(awk -v x="$w_bw" 'BEGIN {printf "%.3f", x * 1048576 * 8 / 1e9}')
i_gbps=$(repeat iperf)
w_lat=$(repeat perftest 5 ib_write_lat -d wharf0 -s 64 -n 5000)
t_lat=$(repeat tcp_pingpong)
jain=$(repeat flows jain --qps 512)
q1=$(repeat flows aggregate_gbps --qps 1)
q64=$(repeat flows aggregate_gbps --qps 64)
q512=$(repeat flows aggregate_gbps --qps 512)
q4096=$(repeat flows aggregate_gbps --qps 4096 --size 16384)
q1_16k=$(repeat flows aggregate_gbps --qps 1 --size 16384)
s8=$(repeat flows aggregate_gbps --qps 8 --op send)
s8_stalled=$(repeat flows aggregate_gbps --qps 8 --op send --stalled 1)

# Memory: h1's router before and after a process holds 2000 connected QPs (1000 pairs, on h1
# alone), and h3's router before and after its first peer host connects and carries a flow
# at full speed for 4 s (its queues grow to what the load needs).
r1=$(awk '/^h1 / {for (i = 1; i <= NF; i++) if ($i == "pid") print $(i + 1)}' "$WORK/up.log")
r3=$(awk '/^h3 / {for (i = 1; i <= NF; i++) if ($i == "pid") print $(i + 1)}' "$WORK/up.log")
before=$(rss_kib "$r1")
WHARF_ROUTER=$H1 LD_PRELOAD=$LIB "$B/bin/wharf-idle-qps" 2000 4 > "$WORK/idle.log" &
idle=$!
for _ in $(seq 200); do grep -q ready "$WORK/idle.log" 2> /dev/null && break; sleep 0.05; done
after=$(rss_kib "$r1")
wait $idle || true
per_qp=$(((after - before) * 1024 / 2000))
peer_before=$(rss_kib "$r3")
LD_PRELOAD=$LIB timeout 120 "$B/bin/wharf-flows" --from "$H1" --to /run/wharf-lab/h3/wharfd.sock \
  --seconds 4 --qps 1 > /dev/null
peer_after=$(rss_kib "$r3")
per_peer=$(((peer_after - peer_before) * 1024))

# The latency again with routers that sleep as soon as they are idle (--spin-us 0): on two
# cores, two spinning perftest processes and two spinning routers share the CPUs.
"$LAB" down > /dev/null
"$LAB" up --hosts 2 --wharfd "$B/bin/wharfd" -- --spin-us 0 > /dev/null
w_lat0=$(repeat perftest 5 ib_write_lat -d wharf0 -s 64 -n 5000)

{
  echo "| Goal | Wharf | Baseline (same run) | Ratio | Target |"
  echo "|---|---|---|---|---|"
  echo "| ib_write_bw 1 MiB h2 -> h1 vs iperf3 one stream | ${w_gbps} Gbit/s | ${i_gbps} Gbit/s | $(ratio "$w_gbps" "$i_gbps") | >= 0.9 |"
  echo "| ib_write_lat 64 B typical vs busy-polling TCP ping-pong 64 B (one way) | ${w_lat} us | ${t_lat} us | $(ratio "$w_lat" "$t_lat") | <= 1.2 |"
  echo "| the same, routers started with --spin-us 0 | ${w_lat0} us | ${t_lat} us | $(ratio "$w_lat0" "$t_lat") | (<= 1.2) |"
  echo "| 512 RC flows (WRITE 64 KiB): Jain's fairness index | ${jain} | | | >= 0.95 |"
  echo "| aggregate, 64 QPs vs 1 QP (WRITE 64 KiB) | ${q64} Gbit/s | ${q1} Gbit/s | $(ratio "$q64" "$q1") | >= 0.9 |"
  echo "| aggregate, 512 QPs vs 1 QP (WRITE 64 KiB) | ${q512} Gbit/s | ${q1} Gbit/s | $(ratio "$q512" "$q1") | >= 0.9 |"
  echo "| aggregate, 4096 QPs vs 1 QP (WRITE 16 KiB) | ${q4096} Gbit/s | ${q1_16k} Gbit/s | $(ratio "$q4096" "$q1_16k") | >= 0.9 |"
  echo "| 8 SEND flows with a 9th whose receiver posts nothing, vs without | ${s8_stalled} Gbit/s | ${s8} Gbit/s | $(ratio "$s8_stalled" "$s8") | >= 0.9 |"
  echo "| router memory per connected QP (RSS, 2000 QPs) | ${per_qp} B | | | measured |"
  echo "| router memory per peer host (RSS, first connection, 4 s at full speed) | ${per_peer} B | | | measured |"
} | tee "$B/hosts-results.md"
echo "(medians of $REPS runs; $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ))"
