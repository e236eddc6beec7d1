#!/usr/bin/env bash
# Runs an unmodified program pair (or a single program) in Wharf containers on a private router.
#
# Usage:
#   pair_test.sh [OPTIONS] MODE SERVER_CMD... -- CLIENT_CMD...
#   pair_test.sh [OPTIONS] MODE --single CMD...
#
#   MODE      preload (wharf-run's default: LD_PRELOAD) or dropin (wharf-run --dropin)
#
# Pair form: starts wharfd, starts SERVER_CMD in container A in the background, waits until it
# listens on TCP --port inside A's namespace, runs CLIENT_CMD in container B (bounded by
# --timeout), then waits for the server to exit. Passes when both exit with status 0 and every
# --expect / --expect-server text appears in the client's / server's output.
# In either command, @SERVER_VIP@ becomes A's VIP and @CLIENT_VIP@ B's. The first bare `--`
# after MODE separates the commands, so SERVER_CMD cannot contain one.
#
# Single form: starts wharfd and runs CMD in one container; passes when it exits with status 0
# and its output contains every --expect text.
#
# Options:
#   --port N              TCP port the server listens on (default 18515, rdma-core's and
#                         perftest's default)
#   --cm                  the server listens with rdma_cm on --port, not on TCP
#   --timeout S           bound on the client / single command (default $E2E_TIMEOUT or 75)
#   --expect TEXT         client (single: the command) output must contain TEXT; repeatable
#   --expect-server TEXT  server output must contain TEXT; repeatable
#
# Environment: WHARF_BIN_DIR (required, e.g. build/bin) and the E2E_* knobs described in lib.sh
# (E2E_VERBOSE=1 shows all output, E2E_KEEP=1 keeps the temporary directory).
# Exit status: 0 pass, 1 fail, 77 skipped (not root, program not installed).
#
# Examples, from the repository root after building wharfd, wharf-run and the library:
#   sudo WHARF_BIN_DIR=build/bin tests/e2e/pair_test.sh preload \
#       ibv_rc_pingpong -d wharf0 -n 200 -- ibv_rc_pingpong -d wharf0 -n 200 @SERVER_VIP@
#   sudo WHARF_BIN_DIR=build/bin tests/e2e/pair_test.sh --expect wharf0 dropin --single ibv_devices
#   # The harness alone (no RDMA): a TCP exchange between the two containers.
#   sudo WHARF_BIN_DIR=build/bin tests/e2e/pair_test.sh --expect pong preload \
#       perl tests/e2e/tcp_pong.pl 18515 -- bash -c 'exec 3<>/dev/tcp/@SERVER_VIP@/18515 && head -n1 <&3'
set -u

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$E2E_DIR/lib.sh"

usage() {
  sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

port=18515
listen=tcp
expect_client=()
expect_server=()
while (($#)); do
  case $1 in
    --port) port=${2:?--port needs a value}; shift 2 ;;
    --cm) listen=cm; shift ;;
    --timeout) E2E_TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
    --expect) expect_client+=("${2?--expect needs a value}"); shift 2 ;;
    --expect-server) expect_server+=("${2?--expect-server needs a value}"); shift 2 ;;
    -h | --help) usage ;;
    --*) echo "pair_test.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
(($#)) || usage
mode=$1
shift
[[ $mode == preload || $mode == dropin ]] || { echo "pair_test.sh: MODE must be preload or dropin, not '$mode'" >&2; usage; }

single=0
server_cmd=()
client_cmd=()
if [[ ${1:-} == --single ]]; then
  single=1
  shift
  client_cmd=("$@")
else
  while (($#)) && [[ $1 != -- ]]; do server_cmd+=("$1"); shift; done
  (($#)) || { echo "pair_test.sh: missing -- between SERVER_CMD and CLIENT_CMD" >&2; usage; }
  shift
  client_cmd=("$@")
  ((${#server_cmd[@]})) || { echo "pair_test.sh: empty SERVER_CMD" >&2; usage; }
fi
((${#client_cmd[@]})) || { echo "pair_test.sh: empty command" >&2; usage; }

vip_a=$(e2e_vip 0)
vip_b=$(e2e_vip 1)
name_a=$(e2e_name A)
name_b=$(e2e_name B)

cmd=()
srv=()
cli=()
# substitute OUTVAR WORD...: copies the words into array OUTVAR with the @..._VIP@ tokens replaced.
substitute() {
  local -n out=$1
  shift
  local w
  out=()
  for w in "$@"; do
    w=${w//@SERVER_VIP@/$vip_a}
    w=${w//@CLIENT_VIP@/$vip_b}
    out+=("$w")
  done
}

e2e_init
if ((single)); then
  e2e_require_command "${client_cmd[0]}"
else
  e2e_require_command "${server_cmd[0]}" "${client_cmd[0]}"
fi
e2e_start_router

if ((single)); then
  substitute cmd "${client_cmd[@]}"
  e2e_log "[$mode] ${cmd[*]}"
  e2e_run_container single "$name_a" "$vip_a" "$mode" "$E2E_TIMEOUT" "${cmd[@]}"
  status=$?
  ((status == 124)) && e2e_fail "command timed out after $E2E_TIMEOUT s"
  ((status == 0)) || e2e_fail "command exited with status $status"
  for t in "${expect_client[@]}"; do e2e_expect single "$t"; done
  e2e_log "PASS"
  exit 0
fi

substitute srv "${server_cmd[@]}"
substitute cli "${client_cmd[@]}"
e2e_log "[$mode] server $name_a ($vip_a): ${srv[*]}"
e2e_log "[$mode] client $name_b ($vip_b): ${cli[*]}"

# run_pair: one run of the server and the client; sets client_status, server_status, server_note.
run_pair() {
  e2e_start_container server "$name_a" "$vip_a" "$mode" "${srv[@]}"
  local server_pid=$E2E_LAST_PID
  if [[ $listen == cm ]]; then
    e2e_wait_cm_listen "$name_a" "$port" "$server_pid" 20
  else
    e2e_wait_listen "$name_a" "$port" "$server_pid" 20
  fi
  e2e_run_container client "$name_b" "$vip_b" "$mode" "$E2E_TIMEOUT" "${cli[@]}"
  client_status=$?
  # A server whose client failed may wait forever for it; do not wait long for it then.
  if ((client_status == 0)); then e2e_wait_pid "$server_pid" 15; else e2e_wait_pid "$server_pid" 2; fi
  server_status=$E2E_STATUS
  server_note=""
  ((E2E_TIMED_OUT)) && server_note=" (did not exit in time; stopped)"
  ((client_status != 0 || server_status != 0 || E2E_TIMED_OUT)) && return 1
  return 0
}

for attempt in 1 2 3; do
  run_pair && break
  ((attempt == 3)) && break
  if e2e_perftest_clock_failed "$E2E_TMP/client.out" "$E2E_TMP/server.out"; then
    e2e_log "perftest could not calibrate its clock (machine busy); running the pair again"
  elif e2e_perftest_cm_retry_crashed "$client_status" "$E2E_TMP/client.out"; then
    e2e_log "perftest's client connected before its server listened, and crashed retrying; running the pair again"
  else
    break
  fi
done
if ((client_status != 0 || server_status != 0 || E2E_TIMED_OUT)); then
  client_note=""
  ((client_status == 124)) && client_note=" (timed out after $E2E_TIMEOUT s)"
  e2e_fail "client exited with status $client_status$client_note, server with $server_status$server_note"
fi
for t in "${expect_client[@]}"; do e2e_expect client "$t"; done
for t in "${expect_server[@]}"; do e2e_expect server "$t"; done
e2e_log "PASS"
exit 0
