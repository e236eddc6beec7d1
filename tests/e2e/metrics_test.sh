#!/usr/bin/env bash
# wharfd --metrics (issue #20): after `ib_write_bw -n 2000 -s 65536` between two containers,
# /metrics (which promtool accepts) counts for the client's container what perftest moved,
# 2000 x 65536 bytes within 1 % in 2000 WRITEs, though the container has gone by the scrape; and while a
# server waits for its client, its container holds a QP, CQ, MR and PD by
# wharf_container_objects and, with --metrics-per-qp, its QP has a series of its own (gone
# with the QP). PATH (argument): direct
# (the library executes the WRITEs itself) or router (--direct-path off).
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/metrics_test.sh direct|router
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
PATH_KIND=${1:-direct}
e2e_init
e2e_require_command ib_write_bw
e2e_require_command curl
e2e_require_command promtool
E2E_WHARFD_ARGS="--metrics 127.0.0.1:0 --metrics-per-qp"
[[ $PATH_KIND == router ]] && E2E_WHARFD_ARGS+=" --direct-path off"
e2e_start_router
url=""
for _ in $(seq 50); do
  url=$(grep -o "metrics at http://[0-9.:]*/metrics" "$E2E_TMP/wharfd.log" | cut -d' ' -f3)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || e2e_fail "wharfd logged no metrics address"

# While ibv_rc_pingpong's server waits for its client, its container holds a QP, CQ, MR and
# PD (it makes them before it listens).
O=$(e2e_name O)
OVIP=$(e2e_vip 2)
e2e_start_container holder "$O" "$OVIP" preload ibv_rc_pingpong -d wharf0 -n 10
holder=$E2E_LAST_PID
e2e_wait_listen "$O" 18515 "$holder" 20
curl -sf "$url" > "$E2E_TMP/during.txt" || e2e_fail "no answer from $url"
E2E_LOGS+=("metrics while the holder waits:$E2E_TMP/during.txt")
for kind in qp cq mr pd; do
  grep -q "^wharf_container_objects{.*container=\"$O\".*kind=\"$kind\".*} [1-9]" \
    "$E2E_TMP/during.txt" || e2e_fail "/metrics shows no $kind held by $O"
done
grep -q '^wharf_router_qps [1-9]' "$E2E_TMP/during.txt" || e2e_fail "no QPs on the router"
# --metrics-per-qp: the waiting QP has its own series.
grep -q "^wharf_qp_tx_bytes_total{.*container=\"$O\".*qpn=\"0x[0-9a-f]*\",type=\"RC\"} 0" \
  "$E2E_TMP/during.txt" || e2e_fail "/metrics has no per-QP series for $O's QP"
e2e_run_container pinger "$(e2e_name P)" "$(e2e_vip 3)" preload 30 \
  ibv_rc_pingpong -d wharf0 -n 10 "$OVIP" || e2e_fail "ibv_rc_pingpong failed"
e2e_wait_pid "$holder" 15

S=$(e2e_name S)
C=$(e2e_name C)
SVIP=$(e2e_vip 0)
bytes=$((2000 * 65536))
for attempt in 1 2 3; do
  e2e_start_container server "$S" "$SVIP" preload ib_write_bw -d wharf0 -s 65536 -n 2000
  srv=$E2E_LAST_PID
  e2e_wait_listen "$S" 18515 "$srv" 20
  e2e_start_container client "$C" "$(e2e_vip 1)" preload ib_write_bw -d wharf0 -s 65536 -n 2000 \
    "$SVIP"
  cli=$E2E_LAST_PID
  e2e_wait_pid "$cli" 60
  client_status=$E2E_STATUS
  e2e_wait_pid "$srv" 15
  ((client_status == 0 && E2E_STATUS == 0)) && break
  if ((attempt == 3)) || ! e2e_perftest_clock_failed "$E2E_TMP/client.out" "$E2E_TMP/server.out"; then
    e2e_fail "ib_write_bw failed (client $client_status, server $E2E_STATUS)"
  fi
  e2e_log "perftest could not calibrate its clock (machine busy); again"
done

curl -sf "$url" > "$E2E_TMP/metrics.txt" || e2e_fail "no answer from $url"
E2E_LOGS+=("metrics:$E2E_TMP/metrics.txt")
promtool check metrics < "$E2E_TMP/metrics.txt" > "$E2E_TMP/promtool.out" 2>&1 ||
  { E2E_LOGS+=("promtool:$E2E_TMP/promtool.out"); e2e_fail "promtool check metrics"; }
series() { # series METRIC CONTAINER [LABEL]: METRIC's value for CONTAINER (and LABEL="...")
  awk -v m="$1" -v c="container=\"$2\"" -v l="${3:-}" \
    'index($0, m "{") == 1 && index($0, c) && index($0, l) {v += $NF} END {printf "%.0f", v}' \
    "$E2E_TMP/metrics.txt"
}
tx=$(series wharf_container_tx_bytes_total "$C")
awk -v t="$tx" -v b="$bytes" 'BEGIN {exit !(t >= b && t <= b * 1.01)}' ||
  e2e_fail "the client's container sent $tx bytes by /metrics; ib_write_bw moved $bytes"
writes=$(series wharf_container_wrs_total "$C" 'opcode="rdma_write"')
((writes == 2000)) || e2e_fail "the client's container completed $writes WRITEs by /metrics; 2000 were posted"
rx=$(series wharf_container_rx_bytes_total "$S")
e2e_log "$PATH_KIND path: client tx_bytes $tx in $writes WRITEs, server rx_bytes $rx (ib_write_bw moved $bytes)"
grep -q '^wharf_router_qps 0' "$E2E_TMP/metrics.txt" || e2e_fail "QPs left after both ended"
! grep -q '^wharf_qp_' "$E2E_TMP/metrics.txt" || e2e_fail "per-QP series left after the QPs went"
e2e_log "PASS"
