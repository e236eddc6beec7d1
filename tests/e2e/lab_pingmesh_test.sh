#!/usr/bin/env bash
# Pingmesh across hosts (issue #20): on a three-host wharf-lab whose routers probe every 0.2 s
# and serve /metrics (127.0.0.1:9101 in each host's namespace):
# - h1 sees h2 and h3 up with round trips, by `wharfctl pingmesh show -j` and by /metrics
#   (promtool clean, the RTT histogram counting answers), and up within the tenant network
#   acme/blue (--pingmesh-networks);
# - with h3's switch port down, h1 and h2 see h3 down within 15 s, and h1 still sees h2 up;
# - with the port up again, h1 sees h3 up within 15 s.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_pingmesh_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail
readonly NAMES=()
e2e_lab_script lab_pingmesh_test curl promtool

timeout 60 "$LAB" up --hosts 3 --wharfd "$BIN/wharfd" -- --pingmesh-interval 0.2 \
  --pingmesh-networks acme/blue --metrics 127.0.0.1:9101 > "$TMP/up.log" 2>&1 ||
  e2e_lab_fail "wharf-lab up"

# field HOST PEER KEY [NETWORK]: KEY of HOST's row for PEER in `wharfctl pingmesh show -j`
# (within tenant network NETWORK, else between routers; "" if none).
field() {
  "$BIN/wharfctl" -j -r "/run/wharf-lab/$1/wharfd.sock" pingmesh show > "$TMP/$1.json" 2>&1 &&
    python3 -c 'import json, sys
rows = [r for r in json.load(open(sys.argv[1]))
        if r["peer"] == sys.argv[2] and r.get("tenant", "") + "/" + r.get("network", "") == sys.argv[4]]
print(rows[0][sys.argv[3]] if rows else "")' "$TMP/$1.json" "$2" "$3" "${4:-/}"
}
# await LIMIT WHAT CONDITION...: runs CONDITION every 0.5 s until it holds, at most LIMIT s.
await() {
  local limit=$1 what=$2
  shift 2
  local t
  for ((t = 0; t < limit * 2; t++)); do
    "$@" && return 0
    sleep 0.5
  done
  e2e_lab_fail "$what not within $limit s: h1 $(cat "$TMP/h1.json") h2 $(cat "$TMP/h2.json")"
}
state_is() { [[ $(field "$1" "$2" state) == "$3" ]]; }
measured() { awk -v v="$(field "$1" "$2" rtt_p50_us)" 'BEGIN {exit !(v > 0)}'; }
all_up() { state_is h1 h2 up && state_is h1 h3 up && measured h1 h2 && measured h1 h3; }
blue_up() { [[ $(field h1 h2 state acme/blue) == up && $(field h1 h3 state acme/blue) == up ]]; }
cut_seen() { state_is h1 h3 down && state_is h2 h3 down && state_is h1 h2 up; }

await 10 "h1 seeing h2 and h3 up with round trips" all_up
await 10 "h1 seeing h2 and h3 up within acme/blue" blue_up

ip netns exec wharf-lab-h1 curl -sf http://127.0.0.1:9101/metrics > "$TMP/h1.metrics.log" ||
  e2e_lab_fail "no /metrics from h1's router"
promtool check metrics < "$TMP/h1.metrics.log" > "$TMP/promtool.log" 2>&1 ||
  e2e_lab_fail "promtool check metrics: $(cat "$TMP/promtool.log")"
count=$(awk 'index($0, "wharf_pingmesh_rtt_seconds_count{peer=\"h3\",tenant=\"\",network=\"\"}") == 1 {print $NF}' \
  "$TMP/h1.metrics.log")
((${count:-0} > 0)) || e2e_lab_fail "h1's RTT histogram for h3 counts '$count' answers"

ip -n wharf-lab-sw link set port3 down
await 15 "the cut of h3 seen by h1 and h2" cut_seen
echo "lab_pingmesh_test: cut seen: h1->h3 loss $(field h1 h3 loss), h1->h2 $(field h1 h2 state)"
ip -n wharf-lab-sw link set port3 up
await 15 "h3 seen up again by h1" state_is h1 h3 up
echo "lab_pingmesh_test: h1->h2 p50 $(field h1 h2 rtt_p50_us) us, h1->h3 p50 $(field h1 h3 rtt_p50_us) us"
echo "lab_pingmesh_test: PASS"
