#!/usr/bin/env bash
# Wharf with Debian's Prometheus (issue #20): deploy/prometheus's alert rules pass `promtool
# check rules` and their unit tests; on a two-host `wharf-lab --orchestrator` whose routers
# serve /metrics on their underlay addresses, a Prometheus scraping them every second (with
# those rules loaded) reads back, through its HTTP API, exactly the bytes `ib_write_bw -n 2000
# -s 65536` sent from a container on h2 to one on h1, and the orchestrator's metrics (its
# store up, the routers' reports counted); and every wharf_ metric the alert rules
# and the Grafana dashboard (deploy/grafana) use is one a router or the orchestrator serves.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_prometheus_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
readonly DEPLOY=$HERE/../../deploy
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail, e2e_lab_write_bw
readonly NAMES=(lpA$$ lpB$$)
e2e_lab_script lab_prometheus_test prometheus promtool ib_write_bw curl

promtool check rules "$DEPLOY/prometheus/wharf-alerts.yml" > "$TMP/rules.log" 2>&1 ||
  e2e_lab_fail "promtool check rules: $(cat "$TMP/rules.log")"
(cd "$DEPLOY/prometheus" && promtool test rules wharf-alerts.test.yml) > "$TMP/rules-test.log" 2>&1 ||
  e2e_lab_fail "promtool test rules: $(cat "$TMP/rules-test.log")"

timeout 60 "$LAB" up --hosts 2 --orchestrator --wharfd "$BIN/wharfd" -- --metrics 0.0.0.0:9101 \
  --pingmesh-interval 0.5 > "$TMP/up.log" 2>&1 || e2e_lab_fail "wharf-lab up --orchestrator"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$TMP/prometheus.yml" << CONFIG
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$DEPLOY/prometheus/wharf-alerts.yml"]
scrape_configs:
  - job_name: wharfd
    static_configs: [{targets: ["198.19.0.1:9101", "198.19.0.2:9101"]}]
  - job_name: wharf-orchestrator
    static_configs: [{targets: ["198.19.0.254:9102"]}]
CONFIG
prometheus --config.file "$TMP/prometheus.yml" --storage.tsdb.path "$TMP/tsdb" \
  --web.listen-address "127.0.0.1:$port" > "$TMP/prometheus.log" 2>&1 &
PIDS+=($!)
readonly API=http://127.0.0.1:$port/api/v1
# query PROMQL: the value of its first series ("" if none).
query() {
  curl -sf --get "$API/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2> /dev/null
}
# await LIMIT WHAT PROMQL VALUE: until PROMQL's value is VALUE, at most LIMIT seconds.
await() {
  local t got
  for ((t = 0; t < $1 * 2; t++)); do
    got=$(query "$3")
    [[ $got == "$4" ]] && return 0
    sleep 0.5
  done
  e2e_lab_fail "$2: Prometheus has '$got' for $3, not $4"
}
await 30 "both routers scraped" 'sum(up{job="wharfd"})' 2
await 10 "the orchestrator's store healthy" 'wharf_orchestrator_store_up' 1
reports=$(query 'sum(wharf_orchestrator_requests_total{route="/v1/hosts/{}/report",code="200"})')
((${reports:-0} > 0)) || e2e_lab_fail "the orchestrator counted '$reports' accepted reports"

bytes=$((2000 * 65536))
e2e_lab_write_bw
await 30 "the client's bytes" "wharf_container_tx_bytes_total{container=\"${NAMES[1]}\"}" "$bytes"
await 10 "the client's WRITEs" \
  "wharf_container_wrs_total{container=\"${NAMES[1]}\",opcode=\"rdma_write\"}" 2000
rules=$(curl -sf "$API/rules" | python3 -c 'import json, sys
g = json.load(sys.stdin)["data"]["groups"]
print(sum(1 for x in g for r in x["rules"] if r["health"] == "ok"))')
[[ $rules == 6 ]] || e2e_lab_fail "Prometheus runs $rules healthy Wharf rules, not 6"

# Every wharf_ metric the rules and the dashboard use is served (a histogram by its _bucket).
ip netns exec wharf-lab-h1 curl -sf http://127.0.0.1:9101/metrics > "$TMP/h1.metrics.log"
curl -sf http://198.19.0.254:9102/metrics > "$TMP/orchestrator.metrics.log"
served=$(awk '$1 == "#" && $2 == "TYPE" {print $3; if ($4 == "histogram") print $3 "_bucket"}' \
  "$TMP/h1.metrics.log" "$TMP/orchestrator.metrics.log")
while read -r used; do
  grep -qx "$used" <<< "$served" || e2e_lab_fail "$used is used in deploy/ but nothing serves it"
done < <(grep -oh 'wharf_[a-z_]*' "$DEPLOY/prometheus/wharf-alerts.yml" \
  "$DEPLOY/grafana/wharf-dashboard.json" | sort -u)
echo "lab_prometheus_test: Prometheus read $bytes bytes and 2000 WRITEs of ${NAMES[1]}; $rules rules healthy"
echo "lab_prometheus_test: PASS"
