#!/usr/bin/env bash
# UCX on Wharf against UCX's own transports, side by side in one run (issue #17's goals):
#   across two wharf-lab hosts: tag_bw 1 MiB over rc_verbs (rc_v) vs tcp (goal >= 1.0x),
#                               tag_lat 8 B over rc_verbs vs tcp (goal <= 1.5x);
#   one host:                   ucp_put_lat 8 B over rc_verbs vs posix shared memory, both
#                               processes in one container (goal <= 2x).
# Usage: sudo bash bench/middleware.sh [BUILD_BIN_DIR]   (default build/bin)
set -uo pipefail
BIN=$(cd "${1:-build/bin}" && pwd) || exit 1
command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing (apt-get install ucx-utils)"; exit 1; }
TMP=$(mktemp -d /tmp/wharf-bench-mw.XXXXXX)
cleanup() {
  [[ -n ${ROUTER:-} ]] && kill "$ROUTER" 2>/dev/null
  "$BIN/wharf-lab" down >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT

# perf ROUTER SRV_VIP CLI_VIP TLS TEST SIZE ITERS -> prints "latency_us bandwidth_MBps" (Final line)
perf() {
  local rs=$1 rc=$2 sv=$3 cv=$4 tls=$5 t=$6 size=$7 n=$8
  timeout 120 "$BIN/wharf-run" --router "$rs" --name bms --vip "$sv" -- env UCX_TLS="$tls,self" \
    ucx_perftest -p 13700 >/dev/null 2>&1 &
  local sp=$!
  for _ in $(seq 100); do ip netns exec wharf-bms ss -Hltn "sport = :13700" 2>/dev/null | grep -q . && break; sleep 0.1; done
  timeout 120 "$BIN/wharf-run" --router "$rc" --name bmc --vip "$cv" -- env UCX_TLS="$tls,self" \
    ucx_perftest "$sv" -p 13700 -t "$t" -s "$size" -n "$n" 2>&1 | awk '/^Final:/ {print $4, $7}'
  wait "$sp"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

"$BIN/wharf-lab" down >/dev/null 2>&1
"$BIN/wharf-lab" up --hosts 2 --wharfd "$BIN/wharfd" >"$TMP/lab.log" 2>&1 || { cat "$TMP/lab.log"; exit 1; }
H1=/run/wharf-lab/h1/wharfd.sock
H2=/run/wharf-lab/h2/wharfd.sock
# 4000 MiB each (2-3 s): with 400, a run took a few tenths of a second and back-to-back runs
# of one build gave ratios from 0.5 to 1.3.
read -r _ bw_rc <<<"$(perf $H1 $H2 198.18.1.11 198.18.2.12 rc_v tag_bw 1048576 4000)"
read -r _ bw_tcp <<<"$(perf $H1 $H2 198.18.1.11 198.18.2.12 tcp tag_bw 1048576 4000)"
read -r lat_rc _ <<<"$(perf $H1 $H2 198.18.1.11 198.18.2.12 rc_v tag_lat 8 20000)"
read -r lat_tcp _ <<<"$(perf $H1 $H2 198.18.1.11 198.18.2.12 tcp tag_lat 8 20000)"
"$BIN/wharf-lab" down >/dev/null 2>&1

"$BIN/wharfd" --socket "$TMP/w.sock" >"$TMP/wharfd.log" 2>&1 &
ROUTER=$!
for _ in $(seq 100); do [[ -S $TMP/w.sock ]] && break; sleep 0.05; done
# Both processes in one container, so posix shared memory is possible for UCX.
# A put takes a fraction of a microsecond, where a preemption costs milliseconds: many
# iterations, and the typical (median) latency beside the average.
one() { # TLS -> "average typical" put_lat latency in us
  timeout 120 "$BIN/wharf-run" --router "$TMP/w.sock" --name bm1 --vip 198.18.0.31 -- sh -c "
    UCX_TLS=$1,self ucx_perftest -p 13701 >/dev/null 2>&1 & sleep 1
    UCX_TLS=$1,self ucx_perftest 127.0.0.1 -p 13701 -t ucp_put_lat -s 8 -n 200000; wait" 2>&1 |
    awk '/^Final:/ {print $4, $3}'
}
read -r put_rc put_rc_typ <<<"$(one rc_v)"
read -r put_shm put_shm_typ <<<"$(one posix)"

echo "| measure | Wharf rc_verbs | UCX baseline | ratio | goal |"
echo "|---|---|---|---|---|"
echo "| across hosts: tag_bw 1 MiB (MB/s) | $bw_rc | tcp $bw_tcp | $(ratio "$bw_rc" "$bw_tcp") | >= 1.0 |"
echo "| across hosts: tag_lat 8 B (us) | $lat_rc | tcp $lat_tcp | $(ratio "$lat_rc" "$lat_tcp") | <= 1.5 |"
echo "| one host: ucp_put_lat 8 B (us), average | $put_rc | posix $put_shm | $(ratio "$put_rc" "$put_shm") | <= 2.0 |"
echo "| one host: ucp_put_lat 8 B (us), typical | $put_rc_typ | posix $put_shm_typ | $(ratio "$put_rc_typ" "$put_shm_typ") | |"
