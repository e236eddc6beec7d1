#!/usr/bin/env bash
# Every flag of wharfd and wharf-orchestrator has a WHARF_* twin in the environment (named in
# --help), a twin alone sets its flag, and a flag given on the command line wins over it.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/daemon_env_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

e2e_init

# --help: each option line names its twin, but --help's and wharfd --upgrade's: actions, not
# settings (a WHARF_UPGRADE in a service's environment file would make every start an upgrade).
for daemon in wharfd wharf-orchestrator; do
  "$E2E_BIN/$daemon" --help > "$E2E_TMP/$daemon.help" 2>&1 || e2e_fail "$daemon --help failed"
  grep -qE '^ +--' "$E2E_TMP/$daemon.help" || e2e_fail "$daemon --help lists no options"
  without=$(grep -E '^ +-' "$E2E_TMP/$daemon.help" | grep -v -e '--help' -e '--upgrade' |
    grep -v '(Env:WHARF_')
  [[ -z $without ]] || e2e_fail "$daemon flags without a WHARF_* twin: $without"
done

# start_wharfd LOG ARG...: starts wharfd (environment as the caller exports it) in the
# background and records its pid for the cleanup.
start_wharfd() {
  local log=$1
  shift
  E2E_LOGS+=("wharfd:$log")
  "$E2E_WHARFD" "$@" < /dev/null > "$log" 2>&1 &
  E2E_PIDS+=($!)
}

# The twins alone: the socket's path, the link layer and the log level.
WHARF_SOCKET=$E2E_TMP/env.sock WHARF_LINK_LAYER=eth WHARF_LOG_LEVEL=info \
  start_wharfd "$E2E_TMP/env.log"
wait_for_socket() {
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -S $1 ]] && return 0
    sleep 0.1
  done
  return 1
}
wait_for_socket "$E2E_TMP/env.sock" || e2e_fail "wharfd made no socket where WHARF_SOCKET says"
grep -q "listening on $E2E_TMP/env.sock (link layer Ethernet" "$E2E_TMP/env.log" ||
  e2e_fail "WHARF_LINK_LAYER=eth did not give an Ethernet port: $(cat "$E2E_TMP/env.log")"

# A flag wins over its twin.
WHARF_SOCKET=$E2E_TMP/twin.sock start_wharfd "$E2E_TMP/flag.log" --socket "$E2E_TMP/flag.sock"
wait_for_socket "$E2E_TMP/flag.sock" || e2e_fail "wharfd made no socket where --socket says"
[[ ! -e $E2E_TMP/twin.sock ]] || e2e_fail "WHARF_SOCKET won over --socket"

# A twin's value is checked as its flag's is.
if WHARF_LINK_LAYER=roce timeout 10 "$E2E_WHARFD" --socket "$E2E_TMP/bad.sock" \
  > "$E2E_TMP/bad.log" 2>&1; then
  e2e_fail "wharfd accepted WHARF_LINK_LAYER=roce"
fi
grep -q "link-layer" "$E2E_TMP/bad.log" || e2e_fail "no error names --link-layer: $(cat "$E2E_TMP/bad.log")"
e2e_log "PASS"
