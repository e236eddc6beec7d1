#!/usr/bin/env bash
# qperf (event mode, its default) between two containers: one server, several clients in a
# row, each running RC and UC latency and RC atomics. qperf ends every test with a timer
# signal that must interrupt ibv_get_cq_event; a lost completion or event, or a wait that
# swallows the signal, shows as "timed out".
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/qperf_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
e2e_init
e2e_require_command qperf
e2e_start_router
S=$(e2e_name S)
C=$(e2e_name C)
SVIP=$(e2e_vip 0)
e2e_start_container server "$S" "$SVIP" preload qperf
srv=$E2E_LAST_PID
e2e_wait_listen "$S" 19765 "$srv" 20
for i in 1 2 3 4; do
  e2e_run_container "client$i" "$C" "$(e2e_vip 1)" preload 60 \
    qperf -t 1 "$SVIP" rc_lat uc_lat rc_compare_swap_mr || e2e_fail "qperf run $i exited with $?"
  for t in rc_lat uc_lat rc_compare_swap_mr; do
    grep -q "^$t:" "$E2E_TMP/client$i.out" || e2e_fail "run $i: no $t result"
  done
  grep -qi "timed out\|failed" "$E2E_TMP/client$i.out" && e2e_fail "run $i: $(cat "$E2E_TMP/client$i.out")"
done
kill "$srv" 2>/dev/null
e2e_log "PASS"
