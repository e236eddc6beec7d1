#!/usr/bin/env bash
# What an application sees of a router restart across hosts (issue #23, "Performance"): the
# longest wait for a completion of wharf-restart-stall (SENDs of 64 B one at a time from a
# context on lab host h2's router to one on h1's, ACK timeout ACK_TIMEOUT) when, in each round,
# h1's router (the receiver's) is killed (SIGKILL) and started again DEAD_S later with the same
# command line (as the acceptance check does), and then upgraded in place (wharfd --upgrade).
# The new process continues the QP from the state the old one kept (<socket>.state), and h2's
# router goes back N once the link is back. Goals: <= 1 s after a crash, <= 50 ms after an
# upgrade. EXPRESS (wharfd --express, default off): with it on, small SENDs go over express
# lines between the two libraries and never meet the routers. Prints each round and the
# medians.
#
#   bash bench/restart_stall_hosts.sh [BUILD] [ROUNDS] [ACK_TIMEOUT] [EXPRESS]  # build 5 19 off
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh  # median, lab_bench_checks, lab_bench_work
BUILD=$(readlink -f "${1:-build}")
ROUNDS=${2:-5}
ACK_TIMEOUT=${3:-19}
EXPRESS=${4:-off}
readonly DEAD_S=0.5
LAB=$PWD/tools/wharf-lab/wharf-lab
lab_bench_checks restart_stall_hosts.sh "$BUILD"
[[ -x $BUILD/bin/wharf-restart-stall ]] || {
  echo "restart_stall_hosts.sh: $BUILD has no bin/wharf-restart-stall" >&2
  exit 1
}
lab_bench_work restart-stall-hosts
H1_SOCK=/run/wharf-lab/h1/wharfd.sock
H2_SOCK=/run/wharf-lab/h2/wharfd.sock
"$LAB" up --hosts 2 --wharfd "$BUILD/bin/wharfd" -- --express "$EXPRESS" > "$WORK/lab.log" 2>&1 || {
  echo "restart_stall_hosts.sh: wharf-lab up failed: $(tail -1 "$WORK/lab.log")" >&2
  exit 1
}
h1_pid() { pgrep -f "wharfd --socket $H1_SOCK" | head -1; }
H1_CMD=$(tr '\0' ' ' < "/proc/$(h1_pid)/cmdline")

# longest FROM TO: the longest stall (ms) that began between FROM and TO seconds.
longest() { awk -v a="$1" -v b="$2" '$1 == "stall" && $2 >= a && $2 < b && $3 > m {m = $3} END {print m + 0}' "$WORK/probe.out"; }

crash=() upgrade=()
for ((r = 1; r <= ROUNDS; r++)); do
  LD_PRELOAD=$BUILD/lib/libibverbs.so.1 WHARF_ROUTER=$H2_SOCK \
    timeout 60 "$BUILD/bin/wharf-restart-stall" 7 "$H1_SOCK" "$ACK_TIMEOUT" > "$WORK/probe.out" 2>&1 &
  probe=$!
  sleep 2
  kill -KILL "$(h1_pid)"
  sleep "$DEAD_S"
  ip netns exec wharf-lab-h1 sh -c "$H1_CMD >> $WORK/h1.log 2>&1 &"
  sleep 2
  "$BUILD/bin/wharfd" --upgrade --socket "$H1_SOCK" > /dev/null
  wait "$probe" || { echo "round $r: the probe failed: $(tail -1 "$WORK/probe.out")" >&2; exit 1; }
  crash+=("$(longest 1.5 3.8)")
  upgrade+=("$(longest 4 7)")
  echo "round $r: crash and restart ($DEAD_S s dead): ${crash[-1]} ms; upgrade: ${upgrade[-1]} ms;" \
    "$(tail -1 "$WORK/probe.out")"
done
echo "median stall after a crash and restart of the receiver's router ($DEAD_S s dead):" \
  "$(printf '%s\n' "${crash[@]}" | median) ms (goal <= 1000)"
echo "median stall after wharfd --upgrade of it: $(printf '%s\n' "${upgrade[@]}" | median) ms (goal <= 50)"
