# shellcheck shell=bash
# shellcheck disable=SC2034  # WORK, PIDS and NAMES are the sourcing test's
# Helpers of the tests that drive the control plane (policy_test.sh, cluster_policy_test.sh):
# a scratch directory, a cleanup trap for the processes and containers they start, failing
# with the logs, free ports and bounded waits. Source it, then call control_init.
#
# Needs BIN (the directory holding wharf-run and wharfctl).

# control_init TAG: WORK=/tmp/wharf-TAG.XXXXXX; on exit every pid in PIDS is killed, every
# container named in NAMES removed (wharf-run --cleanup) and WORK deleted. The orchestrator a
# test starts writes its admin token to WHARF_TOKEN_FILE (--admin-token-file), where wharfctl,
# wharfd and wharf-run read it.
control_init() {
  WORK=$(mktemp -d "/tmp/wharf-$1.XXXXXX")
  export WHARF_TOKEN_FILE=$WORK/admin.token
  PIDS=()
  NAMES=()
  trap control_cleanup EXIT
}
control_cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null; wait "$p" 2> /dev/null; done
  for n in "${NAMES[@]}"; do "$BIN/wharf-run" --cleanup "$n" > /dev/null 2>&1; done
  rm -rf "$WORK"
}

# fail MESSAGE: prints MESSAGE and the end of every log in WORK, then exits 1.
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}

# A TCP port of loopback nobody listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 if it never did.
wait_for() {
  local tries=$(($1 * 10))
  shift
  for _ in $(seq "$tries"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

ctl() { "$BIN/wharfctl" "$@"; }

# orchestrator_up: the orchestrator at WHARF_ORCHESTRATOR has written its admin token and
# answers a request made with it.
orchestrator_up() {
  [[ -s $WHARF_TOKEN_FILE ]] &&
    curl -sf -o /dev/null -H "Authorization: Bearer $(cat "$WHARF_TOKEN_FILE")" "$WHARF_ORCHESTRATOR/v1/tenants"
}
