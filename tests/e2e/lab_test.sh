#!/usr/bin/env bash
# End-to-end test of the multi-host lab (tools/wharf-lab): three hosts, containers on two,
# TCP between their VIPs across the hosts, each container served by its own host's router,
# unmodified RDMA programs between containers on the two hosts (the host-to-host transport),
# rdma_cm programs between them (rping, udaddy, perftest -R),
# a VIP outside the host's subnet refused, the fault tests that take h2's link down (the
# verifier; h3 is their healthy path), and nothing left after `wharf-lab down`.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_test.sh
#
# Exit 77 (skipped) when not root. Bounded: every wait has a timeout; the trap tears down.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail, e2e_wait_server, e2e_perftest_clock_failed
readonly NAMES=(labA$$ labB$$ labC$$)
e2e_lab_script lab_test

timeout 60 "$LAB" up --hosts 3 --wharfd "$BIN/wharfd" > "$TMP/up.log" 2>&1 || e2e_lab_fail "wharf-lab up"
grep -q "^h3 .*pid" "$TMP/up.log" || e2e_lab_fail "status does not show h3's router"
timeout 10 "$LAB" up --hosts 3 --wharfd "$BIN/wharfd" > "$TMP/again.log" 2>&1 &&
  e2e_lab_fail "a second 'up' succeeded"
grep -q "already up" "$TMP/again.log" || e2e_lab_fail "a second 'up' did not say the lab is up"

H1=/run/wharf-lab/h1/wharfd.sock
H2=/run/wharf-lab/h2/wharfd.sock
timeout 30 "$BIN/wharf-run" --router "$H1" --name "${NAMES[0]}" --vip 198.18.1.10 -- \
  perl "$HERE/tcp_pong.pl" 18515 > "$TMP/server.log" 2>&1 &
PIDS=($!)
got=
for _ in $(seq 100); do
  got=$(timeout 20 "$BIN/wharf-run" --router "$H2" --name "${NAMES[1]}" --vip 198.18.2.10 -- \
    bash -c 'exec 3<>/dev/tcp/198.18.1.10/18515 && head -n 1 <&3' 2> "$TMP/client.log") && break
  sleep 0.1
done
[[ $got == pong ]] || e2e_lab_fail "TCP from h2's container to h1's container: got '$got'"
wait "${PIDS[0]}" || e2e_lab_fail "server container exited with $?"
PIDS=()
grep -q "serving 198.18.2.10" "$TMP/server.log" || e2e_lab_fail "server did not see h2's container"

# The container on h2 is served by h2's router: its GID carries its own VIP.
timeout 30 "$BIN/wharf-run" --router "$H2" --name "${NAMES[2]}" --vip 198.18.2.20 -- \
  ibv_devinfo -v > "$TMP/devinfo.log" 2>&1 || e2e_lab_fail "ibv_devinfo on h2"
grep -q "wharf0" "$TMP/devinfo.log" || e2e_lab_fail "no wharf0 on h2"
# GID[0] = ::ffff:198.18.2.20, as ibv_devinfo prints it.
grep -q "GID\[  0\]:.*0000:ffff:c612:0214" "$TMP/devinfo.log" || e2e_lab_fail "GID on h2 is not ::ffff:198.18.2.20"
lid=$(awk '/port_lid:/ {print $2; exit}' "$TMP/devinfo.log")
((lid >= 1025 && lid <= 2048)) || e2e_lab_fail "LID $lid on h2 is outside h2's range 1025-2048"

# RDMA between containers on different hosts, through the routers' host-to-host transport:
# unmodified programs, server on h1, client on h2.
rdma_pair() {
  local label=$1 attempt
  shift
  for attempt in 1 2 3; do
    run_rdma_pair "$label" "$@" && break
    if ((attempt == 3)) || ! e2e_perftest_clock_failed "$TMP/$label".*.log; then
      e2e_lab_fail "$label: client or server failed"
    fi
    echo "lab_test: $label: perftest could not calibrate its clock (machine busy); again"
  done
  echo "lab_test: $label across hosts: $(grep -E '^ *[0-9]+ +[0-9]+ |usec/iter' \
    "$TMP/$label.client.log" | tail -1)"
}
# run_rdma_pair LABEL CMD...: one run of CMD as server on h1 and as client on h2; true when both
# succeed.
run_rdma_pair() {
  local label=$1 status=0
  shift
  timeout 60 "$BIN/wharf-run" --router "$H1" --name "${NAMES[0]}" --vip 198.18.1.10 -- "$@" \
    > "$TMP/$label.server.log" 2>&1 &
  PIDS=($!)
  sleep 0.5
  timeout 60 "$BIN/wharf-run" --router "$H2" --name "${NAMES[1]}" --vip 198.18.2.10 -- "$@" \
    198.18.1.10 > "$TMP/$label.client.log" 2>&1 || status=1
  wait "${PIDS[0]}" || status=1
  PIDS=()
  return "$status"
}
rdma_pair rc_pingpong ibv_rc_pingpong -d wharf0 -n 200
rdma_pair rc_pingpong_e_g0 ibv_rc_pingpong -d wharf0 -n 200 -e -g 0
rdma_pair rc_pingpong_c ibv_rc_pingpong -d wharf0 -n 200 -c
rdma_pair ib_send_bw ib_send_bw -d wharf0 -n 2000
rdma_pair ib_send_lat ib_send_lat -d wharf0 -n 1000
rdma_pair ib_write_bw ib_write_bw -d wharf0 -s 1048576 -n 500
rdma_pair ib_write_lat ib_write_lat -d wharf0 -n 1000
rdma_pair ib_read_bw ib_read_bw -d wharf0 -s 1048576 -n 200
rdma_pair ib_read_lat ib_read_lat -d wharf0 -n 1000
rdma_pair ib_atomic_bw ib_atomic_bw -d wharf0 -n 1000
rdma_pair ib_atomic_lat ib_atomic_lat -d wharf0 -n 1000
rdma_pair uc_pingpong ibv_uc_pingpong -d wharf0 -n 200

# The traffic class a QP's address vector asks for is the DSCP of its packets between the
# hosts: capture on h1's link while the pair uses traffic class 184 (DSCP 46) with a GRH.
if command -v tcpdump > /dev/null; then
  timeout 30 ip netns exec wharf-lab-h1 tcpdump -i eth0 -n -v -c 10 \
    'tcp port 4791 and (ip[1] & 0xfc) == 0xb8' > "$TMP/tcpdump.log" 2>&1 &
  TCPDUMP_PID=$!
  sleep 1
  rdma_pair tclass ib_send_bw -d wharf0 -x 0 --tclass=184 -n 500
  wait "$TCPDUMP_PID" || e2e_lab_fail "no packets with DSCP 46 on the host link"
  grep -q "tos 0xb8" "$TMP/tcpdump.log" || e2e_lab_fail "tcpdump shows no tos 0xb8"
  echo "lab_test: DSCP 46 seen on the host link for traffic class 184"
fi
rdma_pair ud_pingpong_g0 ibv_ud_pingpong -d wharf0 -n 200 -s 1024 -g 0
rdma_pair srq_pingpong ibv_srq_pingpong -d wharf0 -n 200
# XRC: each side's initiators send to the other host's XRC SRQs (XRCETH on the host wire).
rdma_pair xsrq_pingpong ibv_xsrq_pingpong -d wharf0 -n 200
rdma_pair ib_send_bw_ud ib_send_bw -d wharf0 -c UD -n 1000
rdma_pair ib_write_bw_uc ib_write_bw -d wharf0 -c UC -n 1000

# rdma_cm between hosts: h2's router asks h1's who holds 198.18.1.10, then the REQ, REP and
# RTU (SIDR for UD) go between the routers; the programs are unmodified.
# cm_pair LABEL PORT SERVER_CMD -- CLIENT_CMD: the server on h1, the client on h2 once the
# server's rdma_cm id listens on PORT; tried again (three times at most) when the client's REQ
# found no listener at h1 (REJECTED, reason 8), which a loaded machine showed once in a few
# runs beside the verifier suites (the listing of h1's ids at that moment goes to the log).
# The previous pair's server may have used PORT: its id must be gone first, or its LISTEN would
# pass for the new server's.
# How the clients print a REJECT for no listener (reason 8): rping and udaddy name the event
# and the status after a comma, perftest's -R after a semicolon or only the event's number (8,
# REJECTED, whatever the reason). rdma_xclient prints only "rdma_connect: ...": no retry.
readonly CM_NO_LISTENER="RDMA_CM_EVENT_REJECTED[,;] error:? 8|Unexpected CM event bl blka 8$"
cm_pair() {
  local label=$1 port=$2 srv=() attempt
  shift 2
  while [[ $1 != -- ]]; do srv+=("$1"); shift; done
  shift
  for attempt in 1 2 3; do
    run_cm_pair "$label" "$port" "${srv[@]}" -- "$@" && break
    if ((attempt == 3)) || ! grep -qsE "$CM_NO_LISTENER" "$TMP/$label.client.log"; then
      e2e_lab_fail "$label across hosts: client or server failed"
    fi
    echo "lab_test: $label: the client's REQ found no listener at h1; again. h1's ids then:"
    cat "$TMP/$label.cm_ids.log"
  done
  echo "lab_test: $label across hosts: ok"
}
# h1_cm_listening PORT: an rdma_cm id on h1 listens on PORT.
h1_cm_listening() {
  "$BIN/wharfctl" -r "$H1" resource show cm_id 2> /dev/null |
    grep -qE "state LISTEN .*src-addr [^ ]*:$1( |$)"
}
# run_cm_pair LABEL PORT SERVER_CMD -- CLIENT_CMD: one run; true when both succeed. A server
# that never gets ready fails the script.
run_cm_pair() {
  local label=$1 port=$2 status=0 srv=() i
  shift 2
  while [[ $1 != -- ]]; do srv+=("$1"); shift; done
  shift
  for ((i = 0; i < 100; i++)); do
    h1_cm_listening "$port" || break
    sleep 0.1
  done
  ((i < 100)) || e2e_lab_fail "$label: the previous server's rdma_cm id still listens on $port"
  timeout 60 "$BIN/wharf-run" --router "$H1" --name "${NAMES[0]}" --vip 198.18.1.10 -- "${srv[@]}" \
    > "$TMP/$label.server.log" 2>&1 &
  PIDS=($!)
  e2e_wait_server "${PIDS[0]}" 20 "rdma_cm port $port (h1, $label)" h1_cm_listening "$port"
  timeout 60 "$BIN/wharf-run" --router "$H2" --name "${NAMES[1]}" --vip 198.18.2.10 -- "$@" \
    > "$TMP/$label.client.log" 2>&1 || status=1
  ((status == 0)) || "$BIN/wharfctl" -r "$H1" resource show cm_id > "$TMP/$label.cm_ids.log" 2>&1
  # A rejected client leaves its server waiting for a connection that will not come.
  ((status == 0)) || kill "${PIDS[0]}" 2> /dev/null
  wait "${PIDS[0]}" || status=1
  PIDS=()
  return "$status"
}
cm_pair rping 7174 rping -s -a 198.18.1.10 -v -C 20 -- rping -c -a 198.18.1.10 -v -C 20
grep -q "ping data: rdma-ping-19" "$TMP/rping.client.log" || e2e_lab_fail "rping across hosts: no 20th ping"
cm_pair udaddy 7174 udaddy -- udaddy -s 198.18.1.10
cm_pair rdma_xserver 7471 rdma_xserver -c x -- rdma_xclient -c x -s 198.18.1.10
grep -q "rdma_xclient: end 0" "$TMP/rdma_xserver.client.log" || e2e_lab_fail "rdma_xclient -c x across hosts"
cm_pair ib_send_bw_R 18515 ib_send_bw -d wharf0 -R -n 1000 -- ib_send_bw -d wharf0 -R -n 1000 198.18.1.10
cm_pair ib_read_bw_R 18515 ib_read_bw -d wharf0 -R -n 200 -- ib_read_bw -d wharf0 -R -n 200 198.18.1.10
# An address on h1 that no container holds: h1's router says so (ADDR_ERROR, -EHOSTUNREACH).
timeout 30 "$BIN/wharf-run" --router "$H2" --name "${NAMES[1]}" --vip 198.18.2.10 -- \
  rping -c -a 198.18.1.99 -C 1 > "$TMP/cm_nobody.log" 2>&1 && e2e_lab_fail "rping to nobody succeeded"
grep -q "RDMA_CM_EVENT_ADDR_ERROR, error -113" "$TMP/cm_nobody.log" ||
  e2e_lab_fail "rping to an unheld address on h1: $(cat "$TMP/cm_nobody.log")"

# A VIP outside the host's container subnet is refused before anything is created.
timeout 30 "$BIN/wharf-run" --router "$H2" --name "${NAMES[2]}" --vip 198.18.1.20 -- true \
  > "$TMP/refused.log" 2>&1
rc=$?
((rc == 125)) || e2e_lab_fail "VIP outside h2's subnet: exit $rc, expected 125"
grep -q "container subnet of host wharf-lab-h2" "$TMP/refused.log" || e2e_lab_fail "no clear refusal"

# Fault tests (a) and (b) of issue #3, with our verifying program (tests/e2e/verifier): h2's
# link goes down for 2 s with WRITEs, SENDs, READs and atomics in flight, and all complete, in
# order, exactly once; the same with the path cut in the switch instead (the routers replace
# their stalled connections); then h2's link stays down past a QP's retry budget, which fails
# that QP alone (the same context's QP to h3 keeps working). Last: taking eth0 down drops h2's
# static routes to the container subnets.
WHARF_VERIFY_LAB=/run/wharf-lab LD_PRELOAD="$BIN/../lib/libibverbs.so.1" timeout 120 \
  "$BIN/wharf-verify" --gtest_filter='CrossHostLabTest.*' > "$TMP/fault.log" 2>&1 ||
  e2e_lab_fail "link-down fault tests (see fault.log)"
grep -q "\[  PASSED  \] 3 tests" "$TMP/fault.log" || e2e_lab_fail "link-down fault tests did not all run"
echo "lab_test: link down for 2 s across hosts: nothing lost or repeated"
echo "lab_test: path cut in the switch for 2 s: nothing lost or repeated"
echo "lab_test: link down past the retry budget: RETRY_EXC_ERR on that QP only"

timeout 30 "$LAB" down || e2e_lab_fail "wharf-lab down"
if ip netns list | grep -q '^wharf-lab-'; then e2e_lab_fail "namespaces left after down"; fi
[[ ! -e /run/wharf-lab ]] || e2e_lab_fail "/run/wharf-lab left after down"
echo "lab_test: PASS"
