#!/usr/bin/env bash
# Wharf's rdma_cm goal (issue #4): connection setup rate (connect + accept + established, both
# sides in containers) per router, target >= 2,000 connections/s on one host; measured against
# TCP connection setup (connect + accept) between the same two containers in the same run.
#
#   sudo bash bench/cm_rate.sh [N]   # N connections per run (default 2000)
#
# Builds a Release tree in build-bench/, starts a private wharfd, and for TCP and rdma_cm with
# 1 and 16 connections being set up at once (each figure the median of 3 runs) runs
# wharf-cm-rate's server in container A (198.18.79.2) and its client in container B
# (198.18.79.3) with wharf-run. Prints a markdown table (also written to
# build-bench/cm-rate-results.md). Needs root and the packages of scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
N=${1:-2000}
B=$ROOT/build-bench
LIMIT=60  # seconds any one server or client may run
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF > /dev/null
if ! grep -qw wharf_rdmacm <<< "$(cmake --build "$B" --target help)"; then
  echo "cm_rate.sh: there is no build target wharf_rdmacm (our librdmacm.so.1, abi/rdmacm) yet" >&2
  exit 1
fi
cmake --build "$B" -j"$(nproc)" --target wharfd wharf_verbs wharf_rdmacm wharf-run wharfctl \
  wharf-cm-rate > /dev/null

WORK=$(mktemp -d /tmp/wharf-cm-rate.XXXXXX)
PIDS=()
NAMES=(cms$$ cmc$$)
SERVER_VIP=198.18.79.2
CLIENT_VIP=198.18.79.3
ROUTER_PID=
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null || true; done
  # Containers go before the router, so wharf-run can unregister them.
  [[ -z $ROUTER_PID ]] || { kill "$ROUTER_PID" 2> /dev/null && wait "$ROUTER_PID" 2> /dev/null; } || true
  for n in "${NAMES[@]}"; do "$B/bin/wharf-run" --cleanup "$n" > /dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

SOCK=$WORK/wharfd.sock
"$B/bin/wharfd" --socket "$SOCK" --log-level warn < /dev/null > "$WORK/wharfd.log" 2>&1 &
ROUTER_PID=$!
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.1; done
[[ -S $SOCK ]] || { cat "$WORK/wharfd.log" >&2; echo "cm_rate.sh: wharfd did not start" >&2; exit 1; }

run_in() {  # run_in NAME VIP CMD...
  local name=$1 vip=$2
  shift 2
  "$B/bin/wharf-run" --router "$SOCK" --name "$name" --vip "$vip" -- "$@"
}
listening() {  # listening MODE PORT: the server in container A listens on PORT
  if [[ $1 == tcp ]]; then
    ip netns exec "wharf-${NAMES[0]}" ss -Hltn "sport = :$2" 2> /dev/null | grep -q .
  else
    "$B/bin/wharfctl" -r "$SOCK" resource show cm_id container "${NAMES[0]}" 2> /dev/null |
      grep -qE "state LISTEN .*src-addr [^ ]*:$2( |$)"
  fi
}
show_logs() {
  for f in "$WORK/srv.log" "$WORK/cli.log"; do
    echo "----- $(basename "$f") -----" >&2
    cat "$f" >&2 2> /dev/null || true
  done
  echo "----- wharfd.log (last 30 lines) -----" >&2
  tail -n 30 "$WORK/wharfd.log" >&2
}

# measure MODE WINDOW: one run; sets RESULT to the client's rate, or to nothing when it failed.
PORT=20080
FAILED=0
RESULT=
measure() {
  local mode=$1 window=$2 srv ok=0 i
  PORT=$((PORT + 1))
  RESULT=
  run_in "${NAMES[0]}" "$SERVER_VIP" "$B/bin/wharf-cm-rate" -s -t "$mode" -p $PORT -n "$N" \
    -T $LIMIT < /dev/null > "$WORK/srv.log" 2>&1 &
  srv=$!
  PIDS+=("$srv")
  for ((i = 0; i < 200; i++)); do
    kill -0 "$srv" 2> /dev/null || break
    if listening "$mode" $PORT; then
      ok=1
      break
    fi
    sleep 0.1
  done
  if [[ $ok == 1 ]]; then
    timeout --foreground -k 5 $((LIMIT + 10)) \
      "$B/bin/wharf-run" --router "$SOCK" --name "${NAMES[1]}" --vip "$CLIENT_VIP" -- \
      "$B/bin/wharf-cm-rate" -c "$SERVER_VIP" -t "$mode" -p $PORT -n "$N" -w "$window" -T $LIMIT \
      < /dev/null > "$WORK/cli.log" 2>&1 || ok=0
  else
    echo "cm_rate.sh: $mode server did not listen on port $PORT" > "$WORK/cli.log"
  fi
  # The server exits once the client's last connection is torn down; do not wait long otherwise.
  for ((i = 0; i < (ok ? 150 : 20); i++)); do kill -0 "$srv" 2> /dev/null || break; sleep 0.1; done
  kill "$srv" 2> /dev/null || true
  wait "$srv" 2> /dev/null || ok=0
  local rate
  rate=$(awk -v m="$mode" '$1 == "cm_rate" && $2 == "mode=" m {sub("rate=", "", $6); print $6}' \
    "$WORK/cli.log")
  if [[ $ok != 1 || -z $rate ]]; then
    echo "cm_rate.sh: $mode, window $window failed:" >&2
    show_logs
    FAILED=1
    return 0
  fi
  RESULT=$rate
}

# This machine's speed drifts by a third from one second to the next (other guests): every
# figure is the median of REPEATS runs, the two modes taking turns.
REPEATS=3
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"  # median
declare -A RATE RUNS
for window in 1 16; do
  for ((r = 0; r < REPEATS; r++)); do
    for mode in tcp cm; do
      measure $mode $window
      [[ -z $RESULT ]] || RUNS[$mode.$window]+="$RESULT "
    done
  done
  for mode in tcp cm; do
    # shellcheck disable=SC2086  # the runs are words
    RATE[$mode.$window]=$(printf '%s\n' ${RUNS[$mode.$window]:-} | median)
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || b == 0) print "-"; else printf "%.3f", a / b}'; }
{
  echo "rdma_cm connection setup rate, $N connections per run, median of $REPEATS runs (goal: >= 2000 conn/s)"
  echo "command: sudo bash bench/cm_rate.sh $N"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo
  echo "| window | TCP conn/s | rdma_cm conn/s | rdma_cm/TCP | rdma_cm runs |"
  echo "|---|---|---|---|---|"
  for window in 1 16; do
    tcp=${RATE[tcp.$window]}
    cm=${RATE[cm.$window]}
    runs=${RUNS[cm.$window]:-}
    echo "| $window | ${tcp:-failed} | ${cm:-failed} | $(ratio "$cm" "$tcp") | ${runs% } |"
  done
} | tee "$B/cm-rate-results.md"
exit $FAILED
