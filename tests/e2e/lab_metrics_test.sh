#!/usr/bin/env bash
# wharfd --metrics across hosts (issue #20): on a two-host wharf-lab whose routers serve
# /metrics (each on 127.0.0.1:9101 inside its own host's namespace), after `ib_write_bw -n 2000
# -s 65536` from a container on h2 to one on h1:
# - h2's link to h1 (traffic class 0) is up, wrote what perftest moved plus the packets'
#   headers (within 2 %), and h1's link from h2 read as much;
# - the client's container counts exactly the bytes and the 2000 WRITEs perftest moved.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_metrics_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail, e2e_lab_write_bw
readonly NAMES=(lmA$$ lmB$$)
e2e_lab_script lab_metrics_test ib_write_bw curl

timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" -- --metrics 127.0.0.1:9101 \
  > "$TMP/up.log" 2>&1 || e2e_lab_fail "wharf-lab up -- --metrics 127.0.0.1:9101"

bytes=$((2000 * 65536))
e2e_lab_write_bw

for h in h1 h2; do
  ip netns exec "wharf-lab-$h" curl -sf http://127.0.0.1:9101/metrics > "$TMP/$h.metrics.log" ||
    e2e_lab_fail "no /metrics from $h's router"
done
# value HOST PREFIX: the value of the first series of HOST's /metrics that starts with PREFIX.
value() {
  awk -v p="$2" 'index($0, p) == 1 {print $NF; exit}' "$TMP/$1.metrics.log"
}
# within LOW HIGH VALUE: whether LOW <= VALUE <= HIGH.
within() { awk -v l="$1" -v h="$2" -v v="${3:-0}" 'BEGIN {exit !(v >= l && v <= h)}'; }
up=$(value h2 'wharf_link_up{peer="h1",traffic_class="0"}')
[[ $up == 1 ]] || e2e_lab_fail "h2's link to h1 is not up by /metrics ('$up')"
tx=$(value h2 'wharf_link_tx_bytes_total{peer="h1",traffic_class="0"}')
within "$bytes" "$((bytes * 102 / 100))" "$tx" ||
  e2e_lab_fail "h2 wrote $tx bytes to h1 by /metrics; ib_write_bw moved $bytes"
rx=$(value h1 'wharf_link_rx_bytes_total{peer="h2",traffic_class="0"}')
within "$bytes" "$((bytes * 102 / 100))" "$rx" ||
  e2e_lab_fail "h1 read $rx bytes from h2 by /metrics; ib_write_bw moved $bytes"
sent=$(value h2 "wharf_container_tx_bytes_total{tenant=\"\",network=\"\",container=\"${NAMES[1]}\"}")
within "$bytes" "$bytes" "$sent" ||
  e2e_lab_fail "the client's container sent $sent bytes by /metrics; ib_write_bw moved $bytes"
writes=$(value h2 "wharf_container_wrs_total{tenant=\"\",network=\"\",container=\"${NAMES[1]}\",opcode=\"rdma_write\"}")
[[ $writes == 2000 ]] || e2e_lab_fail "the client's container completed '$writes' WRITEs; 2000 were posted"
echo "lab_metrics_test: link h2->h1 wrote $tx, h1 read $rx, the container sent $sent bytes in $writes WRITEs (perftest: $bytes)"
echo "lab_metrics_test: PASS"
