#!/usr/bin/env bash
# The router killed (SIGKILL) and started again, or upgraded in place (wharfd --upgrade),
# under running perftest pairs (#23), every operation through the router (--direct-path off):
# wharf-run registers each container again with its LID, the verbs libraries resume their
# sessions with the new router process, and ib_write_bw and ib_send_bw (also with --use-srq)
# run their whole -D time and exit 0 on both sides; so does rping -V, whose rdma_cm ids the
# new process continues, and ucx_perftest over rc_verbs through a crash. What a container's
# destroyed QPs moved is still counted for it after a crash.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/restart_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

e2e_init
e2e_require_command ib_write_bw
e2e_require_command rping
e2e_require_command ucx_perftest
E2E_WHARFD_ARGS="--direct-path off"
e2e_start_router
routers=1

# kill_and_restart: as a crash and a supervisor's restart: the dead router's socket stays a
# moment, then a new router with the same arguments takes the path.
kill_and_restart() {
  kill -KILL "$E2E_ROUTER_PID"
  wait "$E2E_ROUTER_PID" 2>/dev/null
  sleep 0.3
  rm -f "$E2E_SOCK"
  mv "$E2E_TMP/wharfd.log" "$E2E_TMP/wharfd-$routers.log"
  _e2e_add_log "router-$routers" "$E2E_TMP/wharfd-$routers.log"
  routers=$((routers + 1))
  e2e_start_router
  unset 'E2E_LOGS[-1]'  # e2e_start_router listed wharfd.log again
}
# upgrade: the same process executes its binary again and keeps the socket.
upgrade() {
  timeout 20 "$E2E_WHARFD" --upgrade --socket "$E2E_SOCK" >>"$E2E_TMP/upgrade.out" 2>&1 ||
    e2e_fail "wharfd --upgrade failed: $(tail -1 "$E2E_TMP/upgrade.out")"
}

# both_exit_0 TOOL HOW: the client and the server ($client_pid, $server_pid) end, each with
# status 0, within 30 s.
both_exit_0() {
  local side
  for side in "client:$client_pid" "server:$server_pid"; do
    e2e_wait_pid "${side#*:}" 30
    [[ $E2E_TIMED_OUT == 0 ]] || e2e_fail "$1 ${side%%:*} did not finish ($2)"
    [[ $E2E_STATUS == 0 ]] || e2e_fail "$1 ${side%%:*} exited with status $E2E_STATUS ($2)"
  done
}

# TOOL:HOW[:OPTION]; ib_send_bw --use-srq receives through a shared receive queue, which the
# new process continues with the receives the old one had claimed or held (router/srq_records.h).
for run in ib_write_bw:kill_and_restart ib_send_bw:kill_and_restart \
  ib_send_bw:kill_and_restart:--use-srq ib_write_bw:upgrade ib_send_bw:upgrade; do
  tool=${run%%:*}
  how=${run#*:}
  option=
  options=()
  if [[ $how == *:* ]]; then
    option=${how#*:}
    how=${how%%:*}
    options=("$option")
  fi
  name="$tool-$how${option:+-${option#--}}"
  srv=$(e2e_name S)
  cli=$(e2e_name C)
  e2e_start_container "$name-server" "$srv" "$(e2e_vip 11)" preload "$tool" -D 2 "${options[@]}"
  server_pid=$E2E_LAST_PID
  e2e_wait_listen "$srv" 18515 "$server_pid" 20
  e2e_start_container "$name-client" "$cli" "$(e2e_vip 12)" preload "$tool" -D 2 "${options[@]}" \
    "$(e2e_vip 11)"
  client_pid=$E2E_LAST_PID
  sleep 1
  "$how"
  both_exit_0 "$tool${option:+ $option}" "$how"
  e2e_expect "$name-client" "BW average"
  e2e_log "$tool${option:+ $option}: both sides ran through the router's $how"
done
# rping -V: the connection's rdma_cm ids are continued too (router/kept_cm_ids.h), so the
# disconnection at its end reaches both sides.
for how in kill_and_restart upgrade; do
  srv=$(e2e_name S)
  cli=$(e2e_name C)
  e2e_start_container "rping-$how-server" "$srv" "$(e2e_vip 11)" preload \
    rping -s -V -C 20000 -S 1000 -a "$(e2e_vip 11)"
  server_pid=$E2E_LAST_PID
  sleep 1
  e2e_start_container "rping-$how-client" "$cli" "$(e2e_vip 12)" preload \
    rping -c -V -C 20000 -S 1000 -a "$(e2e_vip 11)"
  client_pid=$E2E_LAST_PID
  sleep 1.5
  kill -0 "$client_pid" 2> /dev/null || e2e_fail "rping ended before the router's $how"
  "$how"
  both_exit_0 "rping" "$how"
  e2e_log "rping -V: both sides ran through the router's $how"
done
# Accounting (router/kept_accounting.h): what a container's destroyed QPs moved stays its own
# through a crash. ib_write_bw ends and its container stays (sleep); after the router's
# kill_and_restart, `wharfctl statistic show` gives the container the same figures again.
srv=$(e2e_name S)
cli=$(e2e_name C)
e2e_start_container acct-server "$srv" "$(e2e_vip 11)" preload ib_write_bw -n 500 -s 65536
server_pid=$E2E_LAST_PID
e2e_wait_listen "$srv" 18515 "$server_pid" 20
# shellcheck disable=SC2016 # $1 is sh's
e2e_start_container acct-client "$cli" "$(e2e_vip 12)" preload \
  sh -c 'ib_write_bw -n 500 -s 65536 "$1" && echo WROTE && exec sleep 60' sh "$(e2e_vip 11)"
client_pid=$E2E_LAST_PID
statistics() { "$E2E_BIN/wharfctl" -r "$E2E_SOCK" statistic show container "$cli" 2>/dev/null; }
for ((i = 0; i < 300; i++)); do
  grep -q WROTE "$E2E_TMP/acct-client.out" && break
  kill -0 "$client_pid" 2>/dev/null || e2e_fail "ib_write_bw's container ended early"
  sleep 0.1
done
before=$(statistics | grep -o "tx_bytes [0-9]*")
[[ ${before#tx_bytes } -ge $((500 * 65536)) ]] ||
  e2e_fail "the client's container sent ${before:-nothing} before the crash; 500 x 64 KiB were written"
kill_and_restart
after=
for ((i = 0; i < 100; i++)); do
  after=$(statistics | grep -o "tx_bytes [0-9]*")
  [[ -n $after ]] && break
  sleep 0.1
done
[[ $after == "$before" ]] ||
  e2e_fail "the client's container: $before before the router's crash, ${after:-nothing} after"
e2e_wait_pid "$client_pid" 0
e2e_wait_pid "$server_pid" 10
e2e_log "accounting: the client's container's $before outlived the router's crash"
# UCX (ucx_perftest tag_bw over rc_verbs, whose receives go through a shared receive queue,
# with ud_verbs for its wire-up) through a crash: every message of its count arrives.
srv=$(e2e_name S)
cli=$(e2e_name C)
ucx=(env "UCX_TLS=rc_v,self" UCX_NET_DEVICES=wharf0:1 ucx_perftest -p 13337)
e2e_start_container ucx-server "$srv" "$(e2e_vip 11)" preload "${ucx[@]}"
server_pid=$E2E_LAST_PID
e2e_wait_listen "$srv" 13337 "$server_pid" 20
e2e_start_container ucx-client "$cli" "$(e2e_vip 12)" preload "${ucx[@]}" "$(e2e_vip 11)" \
  -t tag_bw -s 65536 -n 1500000
client_pid=$E2E_LAST_PID
sleep 1.5
kill -0 "$client_pid" 2> /dev/null || e2e_fail "ucx_perftest ended before the router's crash"
kill_and_restart
both_exit_0 ucx_perftest kill_and_restart
grep -qE "^Final: +1500000 " "$E2E_TMP/ucx-client.out" || e2e_fail "ucx_perftest: no final line"
e2e_log "ucx_perftest tag_bw (rc_verbs): both sides ran through the router's kill_and_restart"
e2e_expect upgrade "runs its new binary"
e2e_log "PASS"
