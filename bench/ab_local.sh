#!/usr/bin/env bash
# A/B of two builds of Wharf between two containers on one router (the direct path on, as by
# default), in one run: the same perftest figures with build A's router and library, then
# build B's, alternating REPS times; medians and B/A.
#
#   sudo bash bench/ab_local.sh BUILD_A BUILD_B [REPS]    # e.g. build-main build
#
# WHARFD_ARGS: more arguments for both routers (e.g. "--direct-path off": every message
# through the router); PERFTEST_ARGS: more for every perftest command (e.g. --use-srq);
# AB_SET: which figures (below).
#
# Figures (64 B unless said): ib_send_lat typical (us), ib_send_bw message rate (Mpps),
# ib_send_bw 64 KiB (MB/s), ib_send_lat -e (completion events) 8 B typical (us). Each build dir needs bin/wharfd, bin/wharf-run and
# lib/libibverbs.so.1 (any build type; say which in the results). Needs root and perftest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$(readlink -f "$1")
B=$(readlink -f "$2")
REPS=${3:-3}
. bench/lib.sh  # ab_rounds, ab_table
((EUID == 0)) || { echo "ab_local.sh: needs root" >&2; exit 1; }
for d in "$A" "$B"; do
  [[ -x $d/bin/wharfd && -x $d/bin/wharf-run ]] || { echo "ab_local.sh: $d has no wharfd" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/wharf-ab_local.XXXXXX)
ROUTER_PID=
cleanup() {
  [[ -z $ROUTER_PID ]] || kill "$ROUTER_PID" 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# perftest BUILD COLUMN CMD...: CMD's last result line's COLUMN, server and client each in a
# container of BUILD's router.
perftest() {
  local build=$1 column=$2 sock=$WORK/wharfd.sock server
  shift 2
  rm -f "$sock"
  # shellcheck disable=SC2086 # WHARFD_ARGS and PERFTEST_ARGS are word lists
  "$build/bin/wharfd" --socket "$sock" ${WHARFD_ARGS:-} > "$WORK/wharfd.log" 2>&1 &
  ROUTER_PID=$!
  for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done
  # shellcheck disable=SC2086
  timeout 60 "$build/bin/wharf-run" --router "$sock" --name abs --vip 198.18.0.51 -- "$@" \
    ${PERFTEST_ARGS:-} > /dev/null 2>&1 &
  server=$!
  sleep 1
  # shellcheck disable=SC2086
  timeout 60 "$build/bin/wharf-run" --router "$sock" --name abc --vip 198.18.0.52 -- \
    "$@" ${PERFTEST_ARGS:-} 198.18.0.51 2>&1 | awk -v c="$column" '/^ *[0-9]+ +[0-9]+ /{v = $c} END {print v}'
  wait "$server" || true
  kill "$ROUTER_PID"
  wait "$ROUTER_PID" 2> /dev/null || true
  ROUTER_PID=
}

# The figures of AB_SET: send (the default, above) or atomic (ib_atomic_lat typical (us),
# ib_atomic_bw FETCH_ADD and CMP_AND_SWAP message rates (Mops)).
case ${AB_SET:-send} in
  send)
    round() {
      local build=$1 name=$2
      echo "$(perftest "$build" 5 ib_send_lat -d wharf0 -s 64 -n 20000)" \
        "$(perftest "$build" 5 ib_send_bw -d wharf0 -s 64 -n 200000)" \
        "$(perftest "$build" 4 ib_send_bw -d wharf0 -s 65536 -n 20000)" \
        "$(perftest "$build" 5 ib_send_lat -d wharf0 -e -s 8 -n 20000)" | tee -a "$WORK/$name" |
        sed "s/^/$name: /" >&2
    }
    FIGURES=("ib_send_lat 64 B typical (us)" "ib_send_bw 64 B (Mpps)" "ib_send_bw 64 KiB (MB/s)"
      "ib_send_lat -e 8 B typical (us)")
    ;;
  atomic)
    round() {
      local build=$1 name=$2
      echo "$(perftest "$build" 5 ib_atomic_lat -d wharf0 -n 20000)" \
        "$(perftest "$build" 5 ib_atomic_bw -d wharf0 -A FETCH_AND_ADD -n 200000)" \
        "$(perftest "$build" 5 ib_atomic_bw -d wharf0 -A CMP_AND_SWAP -n 200000)" |
        tee -a "$WORK/$name" | sed "s/^/$name: /" >&2
    }
    FIGURES=("ib_atomic_lat typical (us)" "ib_atomic_bw FETCH_ADD (Mops)"
      "ib_atomic_bw CMP_AND_SWAP (Mops)")
    ;;
  *)
    echo "ab_local.sh: AB_SET is send or atomic" >&2
    exit 1
    ;;
esac

ab_rounds round "$REPS"
ab_table "$A" "$B" "$REPS" "${FIGURES[@]}"
