#!/usr/bin/env bash
# The router of one wharf-lab host killed (SIGKILL) and started again with the same command
# line, then upgraded in place (wharfd --upgrade), under perftest pairs between containers on
# two hosts (#23): the new process continues each connection from the state the old one kept
# (<socket>.state), the other host's router sees the same incarnation reconnect and goes back
# N, and ib_write_bw and ib_send_bw run their whole -D time and exit 0 on both sides; so does
# rping -V, whose rdma_cm ids the new process continues too.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_restart_test.sh
#
# Exit 77 (skipped) when not root or without perftest. Bounded: every wait has a timeout; the
# trap tears the lab down (with whatever router process runs in it).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail, e2e_perftest_clock_failed
readonly NAMES=(rsA$$ rsB$$)
e2e_lab_script lab_restart_test ib_write_bw ib_send_bw rping

timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" > "$TMP/up.log" 2>&1 ||
  e2e_lab_fail "wharf-lab up"
readonly H1=/run/wharf-lab/h1/wharfd.sock H2=/run/wharf-lab/h2/wharfd.sock
H1_CMD=$(tr '\0' ' ' < "/proc/$(cat /run/wharf-lab/h1/wharfd.pid)/cmdline")
readonly H1_CMD
restarts=0

# crash: h1's router dies, and a supervisor starts the same command line half a second later.
crash() {
  local pid
  pid=$(cat /run/wharf-lab/h1/wharfd.pid)
  kill -KILL "$pid"
  sleep 0.5
  restarts=$((restarts + 1))
  ip netns exec wharf-lab-h1 sh -c "$H1_CMD >> $TMP/h1-$restarts.log 2>&1 & echo \$! > /run/wharf-lab/h1/wharfd.pid"
}
# upgrade: h1's router executes its binary again, keeping its socket.
upgrade() {
  timeout 20 "$BIN/wharfd" --upgrade --socket "$H1" >> "$TMP/upgrade.log" 2>&1 ||
    e2e_lab_fail "wharfd --upgrade: $(tail -1 "$TMP/upgrade.log")"
}

# run TOOL HOW: TOOL's server in a container on h1, its client on h2, HOW done to h1's router
# two seconds in. True if both sides exited 0.
run() {
  local tool=$1 how=$2
  timeout 60 "$BIN/wharf-run" --router "$H1" --name "${NAMES[0]}" --vip 198.18.1.11 -- \
    "$tool" -d wharf0 -D 4 -u 19 > "$TMP/$tool.$how.server.log" 2>&1 &
  local sp=$!
  sleep 1
  timeout 60 "$BIN/wharf-run" --router "$H2" --name "${NAMES[1]}" --vip 198.18.2.12 -- \
    "$tool" -d wharf0 -D 4 -u 19 198.18.1.11 > "$TMP/$tool.$how.client.log" 2>&1 &
  local cp=$!
  sleep 2
  "$how"
  wait "$cp"
  local crc=$?
  wait "$sp"
  local src=$?
  ((crc == 0 && src == 0))
}

for tool in ib_write_bw ib_send_bw; do
  for how in crash upgrade; do
    for attempt in 1 2 3; do
      run "$tool" "$how" && break
      if ((attempt == 3)) || ! e2e_perftest_clock_failed "$TMP/$tool.$how".*.log; then
        e2e_lab_fail "$tool across hosts under h1's router $how: client $(tail -1 \
          "$TMP/$tool.$how.client.log"); server $(tail -1 "$TMP/$tool.$how.server.log")"
      fi
      echo "lab_restart_test: perftest could not calibrate its clock (machine busy); again"
    done
    grep -q "BW average\|#bytes" "$TMP/$tool.$how.client.log" ||
      e2e_lab_fail "$tool client printed no result ($how)"
    echo "lab_restart_test: $tool across hosts through h1's router $how:" \
      "$(grep -E '^ *[0-9]+ +[0-9]+ ' "$TMP/$tool.$how.client.log" | tail -1)"
  done
done
# rping -V: its connection's rdma_cm ids are continued too (router/kept_cm_ids.h), so the
# disconnection at its end reaches both sides.
for how in crash upgrade; do
  timeout 60 "$BIN/wharf-run" --router "$H1" --name "${NAMES[0]}" --vip 198.18.1.11 -- \
    rping -s -V -C 8000 -S 1000 -a 198.18.1.11 > "$TMP/rping.$how.server.log" 2>&1 &
  sp=$!
  sleep 1
  timeout 60 "$BIN/wharf-run" --router "$H2" --name "${NAMES[1]}" --vip 198.18.2.12 -- \
    rping -c -V -C 8000 -S 1000 -a 198.18.1.11 > "$TMP/rping.$how.client.log" 2>&1 &
  cp=$!
  sleep 2
  kill -0 "$cp" 2> /dev/null || e2e_lab_fail "rping ended before h1's router $how"
  "$how"
  wait "$cp" || e2e_lab_fail "rping client under h1's router $how: $(tail -1 "$TMP/rping.$how.client.log")"
  wait "$sp" || e2e_lab_fail "rping server under h1's router $how: $(tail -1 "$TMP/rping.$how.server.log")"
  echo "lab_restart_test: rping -V -C 8000 across hosts through h1's router $how"
done
grep -q "QP(s) to continue" /run/wharf-lab/h1/wharfd.log "$TMP"/h1-*.log ||
  e2e_lab_fail "h1's new router process continued no QP"
grep -q "restarted" /run/wharf-lab/h2/wharfd.log &&
  e2e_lab_fail "h2 saw a new incarnation of h1's router: $(grep restarted /run/wharf-lab/h2/wharfd.log | head -1)"
echo "lab_restart_test: PASS"
