#!/usr/bin/env bash
# What observability costs (issue #20), in one run:
# 1. cross-host `ib_write_bw -s 65536 -D 4` between two wharf-lab hosts with Pingmesh off and
#    no /metrics (A) and with Pingmesh every 1 s plus /metrics scraped every second on both
#    routers (B), alternating REPS times: median MB/s, B/A;
# 2. intra-host `ib_write_lat -s 64 -n 20000` between two containers on h1 of the same labs
#    (the router path: --direct-path off, and the direct path): median t_typical, B - A in us;
# 3. scrapes of one router (wharfd --metrics) holding 10,000 idle RC QPs in 100 containers
#    (100 processes, each in a network namespace of its own, each with 100 QPs: bench/
#    idle_qps.cc): curl's total time for 20 scrapes, median and max, and the series served;
#    the same with --metrics-per-qp.
#
#   sudo bash bench/observability_cost.sh BUILD [REPS]    # e.g. build
#
# Needs root (namespaces), perftest, curl and a BUILD with bin/wharfd, bin/wharf-run and
# bin/wharf-idle-qps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh # lab_bench_one_build (BUILD, REPS, LAB, WORK, lab_perftest), median
lab_bench_one_build observability_cost.sh observability-cost "$@"
SCRAPER=""
bench_cleanup() {
  [[ -z $SCRAPER ]] || kill "$SCRAPER" 2> /dev/null || true
  pkill -f "wharf-idle-qps 100 600" 2> /dev/null || true
  [[ -z ${ROUTER:-} ]] || kill "$ROUTER" 2> /dev/null || true
}

# local_lat PATH: t_typical of ib_write_lat between two containers on h1.
local_lat() {
  local srv
  for _ in 1 2 3; do
    timeout 120 "$BUILD/bin/wharf-run" --router /run/wharf-lab/h1/wharfd.sock --name "olA$$" \
      --vip 198.18.1.20 -- ib_write_lat -d wharf0 -s 64 -n 20000 > "$WORK/lsrv.log" 2>&1 &
    srv=$!
    sleep 0.5
    timeout 120 "$BUILD/bin/wharf-run" --router /run/wharf-lab/h1/wharfd.sock --name "olB$$" \
      --vip 198.18.1.21 -- ib_write_lat -d wharf0 -s 64 -n 20000 198.18.1.20 > "$WORK/lcli.log" 2>&1 || true
    wait $srv || true
    grep -q "Correlation coefficient" "$WORK/lcli.log" "$WORK/lsrv.log" || break
  done
  grep -E '^ *[0-9]+ +[0-9]+ ' "$WORK/lcli.log" | tail -1 | awk '{print $5}'
}

# round NAME on|off DIRECT: one lab; appends bandwidth to WORK/NAME.bw, latency to NAME.lat.
round() {
  local name=$1 on=$2 direct=$3
  local opts=(--pingmesh-interval 0 --direct-path "$direct")
  [[ $on == on ]] && opts=(--pingmesh-interval 1 --metrics 127.0.0.1:9101 --direct-path "$direct")
  "$LAB" up --hosts 2 --wharfd "$BUILD/bin/wharfd" -- "${opts[@]}" > "$WORK/up.log"
  if [[ $on == on ]]; then
    (while :; do
      for h in h1 h2; do ip netns exec "wharf-lab-$h" curl -sf -o /dev/null http://127.0.0.1:9101/metrics || true; done
      sleep 1
    done) &
    SCRAPER=$!
  fi
  [[ $direct == off ]] && lab_perftest "$BUILD" 4 ib_write_bw -d wharf0 -s 65536 -D 4 >> "$WORK/$name.bw"
  local_lat >> "$WORK/$name.lat"
  if [[ -n $SCRAPER ]]; then
    kill "$SCRAPER" 2> /dev/null || true
    wait "$SCRAPER" 2> /dev/null || true
    SCRAPER=""
  fi
  "$LAB" down > /dev/null
}

echo "Measuring ($REPS rounds of each, alternating) ..." >&2
for _ in $(seq "$REPS"); do
  round a off off
  round b on off
  round ad off on
  round bd on on
done
ratio() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%.3f", y / x}'; }
diff_us() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%+.2f", y - x}'; }
bwa=$(median < "$WORK/a.bw") bwb=$(median < "$WORK/b.bw")
la=$(median < "$WORK/a.lat") lb=$(median < "$WORK/b.lat")
lda=$(median < "$WORK/ad.lat") ldb=$(median < "$WORK/bd.lat")
echo "| median of $REPS | A: no metrics, no Pingmesh | B: /metrics scraped every 1 s, Pingmesh every 1 s | B vs A |"
echo "|---|---|---|---|"
echo "| ib_write_bw 64 KiB h2 -> h1, MB/s | $bwa | $bwb | $(ratio "$bwa" "$bwb")x |"
echo "| ib_write_lat 64 B on h1, router path, t_typical us | $la | $lb | $(diff_us "$la" "$lb") us |"
echo "| ib_write_lat 64 B on h1, direct path, t_typical us | $lda | $ldb | $(diff_us "$lda" "$ldb") us |"

# 3. Scrapes of a router with 10,000 QPs in 100 containers.
scrape_round() {
  local per_qp=$1 port sock=$WORK/wharfd.sock extra=()
  [[ $per_qp == on ]] && extra=(--metrics-per-qp)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$BUILD/bin/wharfd" --socket "$sock" --metrics "127.0.0.1:$port" "${extra[@]}" > "$WORK/wharfd.log" 2>&1 &
  ROUTER=$!
  for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
  local k
  for k in $(seq 100); do
    unshare --net env WHARF_ROUTER="$sock" LD_PRELOAD="$BUILD/lib/libibverbs.so.1" \
      "$BUILD/bin/wharf-idle-qps" 100 600 > "$WORK/idle$k.out" 2>&1 &
  done
  for k in $(seq 100); do
    for _ in $(seq 1200); do grep -q ready "$WORK/idle$k.out" 2> /dev/null && break; sleep 0.05; done
  done
  local ready
  ready=$(grep -l ready "$WORK"/idle*.out | wc -l)
  : > "$WORK/scrapes"
  for _ in $(seq 20); do
    curl -sf -o "$WORK/scrape.txt" -w '%{time_total}\n' "http://127.0.0.1:$port/metrics" >> "$WORK/scrapes"
  done
  local qps series
  qps=$(awk '$1 == "wharf_router_qps" {print $2}' "$WORK/scrape.txt")
  series=$(grep -vc '^#' "$WORK/scrape.txt")
  echo "| $per_qp | $ready | $qps | $series | $(awk '{print $1 * 1000}' "$WORK/scrapes" | median) | $(awk '{print $1 * 1000}' "$WORK/scrapes" | sort -g | tail -1) |"
  pkill -f "wharf-idle-qps 100 600" || true
  kill "$ROUTER"
  wait "$ROUTER" 2> /dev/null || true
  ROUTER=""
  rm -f "$WORK"/idle*.out
}
echo
echo "| --metrics-per-qp | containers | QPs | series | scrape ms, median of 20 | max |"
echo "|---|---|---|---|---|---|"
scrape_round off
scrape_round on
