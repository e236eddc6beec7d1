#!/usr/bin/env bash
# rsockets (our librdmacm's rsocket API) with rdma-core's own programs, unmodified: rstream in
# its blocking, non-blocking and asynchronous modes with data verification, riostream (riomap
# and riowrite), udpong (datagram rsockets), rcopy (a file, compared), iperf3 under rdma-core's
# librspreload (its server listens as an rdma_cm id, so its bytes go by RDMA; against a plain TCP
# server it falls back to TCP), the API's edge cases
# (rsocket_probe.c), a listener whose router goes away; then rstream and udpong across two
# wharf-lab hosts.
#
#   WHARF_BIN_DIR=build/bin WHARF_RSOCKET_PROBE=build/bin/rsocket_probe bash tests/e2e/rsocket_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
e2e_init
e2e_require_command rstream riostream udpong rcopy iperf3
readonly PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
[[ -f $PRELOAD ]] || e2e_skip "librspreload is not installed (librdmacm1)"
e2e_use_lab
e2e_start_router
S=$(e2e_name S)
C=$(e2e_name C)
SVIP=$(e2e_vip 0)
CVIP=$(e2e_vip 1)

# pair LABEL PORT SERVER_CMD... -- CLIENT_CMD...: the server in S, the client in C.
pair() {
  local label=$1 port=$2
  shift 2
  local -a srv=()
  while [[ $1 != -- ]]; do srv+=("$1"); shift; done
  shift
  e2e_start_container "$label-srv" "$S" "$SVIP" preload "${srv[@]}"
  local pid=$E2E_LAST_PID
  e2e_wait_server "$pid" 20 "rdma_cm port $port" e2e_cm_listening "$S" "$port"
  e2e_run_container "$label" "$C" "$CVIP" preload 60 "$@" || e2e_fail "$label: client exited with $?"
  E2E_SERVER_PID=$pid
}

for mode in b n a; do
  pair "rstream-$mode" 7471 rstream -b "$SVIP" -T "$mode" -T v -S 65536 -C 2000 \
    -- rstream -s "$SVIP" -T "$mode" -T v -S 65536 -C 2000
  e2e_wait_pid "$E2E_SERVER_PID" 15
  grep -q "^custom .* 2k " "$E2E_TMP/rstream-$mode.out" || e2e_fail "rstream -T $mode: no result"
done
pair riostream 7471 riostream -b "$SVIP" -S 65536 -C 2000 -- riostream -s "$SVIP" -S 65536 -C 2000
e2e_wait_pid "$E2E_SERVER_PID" 15
grep -q "^custom .* 2k " "$E2E_TMP/riostream.out" || e2e_fail "riostream: no result"

# udpong's server answers for ever: it is stopped once the client is done.
pair udpong 7174 udpong -b "$SVIP" -C 1000 -- udpong -s "$SVIP" -C 1000
# Datagrams may be dropped (a receiver without a posted buffer): udpong counts what arrived.
grep -qE "^custom +1000 +[0-9]" "$E2E_TMP/udpong.out" || e2e_fail "udpong: no result"
kill "$E2E_SERVER_PID" 2>/dev/null
wait "$E2E_SERVER_PID" 2>/dev/null

head -c 8388608 /dev/urandom >"$E2E_TMP/rcopy.src"
pair rcopy 7427 rcopy -- rcopy "$E2E_TMP/rcopy.src" "$SVIP:$E2E_TMP/rcopy.dst"
kill "$E2E_SERVER_PID" 2>/dev/null
wait "$E2E_SERVER_PID" 2>/dev/null
cmp -s "$E2E_TMP/rcopy.src" "$E2E_TMP/rcopy.dst" || e2e_fail "rcopy: the copy differs"

# An unmodified TCP program over rsockets: pair() waits for its rdma_cm listener.
pair iperf3 5201 sh -c "LD_PRELOAD=\$LD_PRELOAD:$PRELOAD exec iperf3 -s -1 -B $SVIP" \
  -- sh -c "LD_PRELOAD=\$LD_PRELOAD:$PRELOAD exec iperf3 -c $SVIP -n 64M"
e2e_wait_pid "$E2E_SERVER_PID" 15
grep -q "sender" "$E2E_TMP/iperf3.out" || e2e_fail "iperf3: no result"

# librspreload's contract with plain TCP peers: when no rsocket listens, its connect falls back to
# a TCP socket (it asks getsockname for the address size with no buffer).
e2e_start_container iperf3-tcp-srv "$S" "$SVIP" preload iperf3 -s -1 -B "$SVIP"
server=$E2E_LAST_PID
e2e_wait_listen "$S" 5201 "$server" 20
e2e_run_container iperf3-fallback "$C" "$CVIP" preload 60 \
  sh -c "LD_PRELOAD=\$LD_PRELOAD:$PRELOAD exec iperf3 -c $SVIP -n 8M" ||
  e2e_fail "iperf3 under librspreload against a TCP server: $(tail -1 "$E2E_TMP/iperf3-fallback.out")"
e2e_wait_pid "$server" 15

# The API's edge cases.
e2e_run_container probe "$S" "$SVIP" preload 60 "$WHARF_RSOCKET_PROBE" "$SVIP" ||
  e2e_fail "rsocket_probe: $(grep FAIL "$E2E_TMP/probe.out")"

# The router goes away under a blocked raccept and no router comes back within
# WHARF_RESUME_S (1 s here): it fails with ENODEV (as after the kernel's DEVICE_REMOVAL)
# instead of spinning on the ended channel.
export WHARF_RESUME_S=1
e2e_start_container orphan-srv "$S" "$SVIP" preload rstream -b "$SVIP" -T b
server=$E2E_LAST_PID
unset WHARF_RESUME_S
e2e_wait_cm_listen "$S" 7471 "$server" 20
kill "$E2E_ROUTER_PID" 2>/dev/null
e2e_wait_pid "$server" 20
((E2E_TIMED_OUT == 0)) || e2e_fail "rstream's raccept did not fail when the router went away"
grep -q "raccept: No such device" "$E2E_TMP/orphan-srv.out" ||
  e2e_fail "rstream without a router: $(head -1 "$E2E_TMP/orphan-srv.out")"

# Across two lab hosts.
timeout 60 "$E2E_LAB" up --hosts 2 --wharfd "$E2E_BIN/wharfd" >"$E2E_TMP/lab.out" 2>&1 || e2e_fail "wharf-lab up"
E2E_SOCK=/run/wharf-lab/h1/wharfd.sock  # where e2e_cm_listening asks from here on
e2e_lab_run x-rstream-srv h1 "$S" 198.18.1.11 60 rstream -b 198.18.1.11 -T b -T v -S 65536 -C 500 &
server=$!
e2e_wait_server "$server" 20 "rdma_cm port 7471" e2e_cm_listening "$S" 7471
e2e_lab_run x-rstream h2 "$C" 198.18.2.12 60 rstream -s 198.18.1.11 -T b -T v -S 65536 -C 500 ||
  e2e_fail "rstream across hosts exited with $?"
wait "$server" || e2e_fail "rstream server across hosts exited with $?"
e2e_lab_run x-udpong-srv h1 "$S" 198.18.1.11 30 udpong -b 198.18.1.11 -C 100 &
server=$!
e2e_wait_server "$server" 20 "rdma_cm port 7174" e2e_cm_listening "$S" 7174
e2e_lab_run x-udpong h2 "$C" 198.18.2.12 30 udpong -s 198.18.1.11 -C 100 || e2e_fail "udpong across hosts"
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
e2e_log "PASS"
