#!/usr/bin/env bash
# A router restarted under a running container (#23): wharf-run notices the registration socket
# hang up, waits out the dead socket the killed router left (ECONNREFUSED, then ENOENT), and
# registers the container again with the new router at the same path, with the LID it had;
# an application started in it afterwards sees that LID; CMD keeps running throughout and
# wharf-run passes on its exit status 0.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/run_reconnect_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

# wait_for SECONDS PID CHECK...: polls CHECK every 0.1 s; fails if PID (wharf-run) exits first.
wait_for() {
  local limit=$1 pid=$2 i
  shift 2
  for ((i = 0; i < limit * 10; i++)); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; e2e_fail "wharf-run exited with status $? early"; }
    sleep 0.1
  done
  return 1
}
# registered_lid LOG: the LID of the line where the router in LOG registered container $NAME.
registered_lid() { sed -n "s/^.*container $NAME registered: vIP $VIP LID \([0-9]*\)\$/\1/p" "$1"; }
has_lid() { [[ -n $(registered_lid "$1") ]]; }

e2e_init
e2e_require_command ibv_devinfo
e2e_start_router
NAME=$(e2e_name R)
VIP=$(e2e_vip 0)
STOP=$E2E_TMP/stop  # CMD ends once this file exists

e2e_start_container run "$NAME" "$VIP" preload \
  sh -c "while [ ! -e '$STOP' ]; do sleep 0.1; done; echo CMD done"
pid=$E2E_LAST_PID
wait_for 20 "$pid" has_lid "$E2E_TMP/wharfd.log" || e2e_fail "container $NAME did not register"
lid=$(registered_lid "$E2E_TMP/wharfd.log")
e2e_log "registered with LID $lid; killing the router"

# The killed router leaves its socket file behind for a while, then the new one makes its own.
kill -KILL "$E2E_ROUTER_PID"
wait "$E2E_ROUTER_PID" 2>/dev/null
mv "$E2E_TMP/wharfd.log" "$E2E_TMP/wharfd-first.log"
_e2e_add_log first-router "$E2E_TMP/wharfd-first.log"
sleep 0.5
rm -f "$E2E_SOCK"
sleep 0.3
e2e_start_router
unset 'E2E_LOGS[-1]'  # e2e_start_router listed wharfd.log a second time

wait_for 10 "$pid" has_lid "$E2E_TMP/wharfd.log" ||
  e2e_fail "the new router did not register container $NAME within 10 s"
[[ $(registered_lid "$E2E_TMP/wharfd.log") == "$lid" ]] ||
  e2e_fail "re-registered with LID $(registered_lid "$E2E_TMP/wharfd.log"), not $lid"
e2e_expect run "router went away; re-registering container $NAME"

# A process started in the container now is served by the new router, with the same LID.
timeout 20 "$E2E_BIN/wharf-exec" "$NAME" ibv_devinfo -d wharf0 >"$E2E_TMP/exec.out" 2>&1 ||
  e2e_fail "ibv_devinfo in the container failed: $(cat "$E2E_TMP/exec.out")"
grep -qE "port_lid:[[:space:]]+$lid$" "$E2E_TMP/exec.out" ||
  e2e_fail "ibv_devinfo does not show LID $lid: $(cat "$E2E_TMP/exec.out")"

touch "$STOP"
e2e_wait_pid "$pid" 15
[[ $E2E_TIMED_OUT == 0 ]] || e2e_fail "wharf-run did not exit after CMD ended"
[[ $E2E_STATUS == 0 ]] || e2e_fail "wharf-run exited with status $E2E_STATUS"
e2e_expect run "CMD done"
e2e_log "PASS"
