#!/usr/bin/env bash
# RDMA middleware on Wharf, unmodified Debian binaries: UCX 1.13's ucx_perftest over rc_verbs
# and ud_verbs, and libfabric 1.17's fi_pingpong over the verbs provider (FI_EP_MSG and
# FI_EP_RDM), between two containers on one router and between two wharf-lab hosts; and Open
# MPI 4.1 with pml ucx: two ranks in one container, and two ranks in containers on two lab
# hosts started by mpirun through wharf-exec.
#
# UCX wires an rc_verbs endpoint up through a UD transport (its `rc_v` alias: rc_verbs plus
# ud_verbs for wireup only); UCX_TLS=rc_verbs alone has no transport to connect with, on any
# device (ucp_context.c's alias table).
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/middleware_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
e2e_init
e2e_require_command ucx_perftest mpirun mpicc fi_pingpong fi_info
e2e_use_lab
e2e_start_router
S=$(e2e_name S)
C=$(e2e_name C)
SVIP=$(e2e_vip 0)
CVIP=$(e2e_vip 1)
PORT=13600

# perftest_pair LABEL TLS TEST SIZE ITERS: server in S, client in C; expects the final line.
perftest_pair() {
  local label=$1 tls=$2 test=$3 size=$4 iters=$5
  e2e_start_container "$label-srv" "$S" "$SVIP" preload env UCX_TLS="$tls,self" \
    UCX_NET_DEVICES=wharf0:1 ucx_perftest -p $PORT
  local srv=$E2E_LAST_PID
  e2e_wait_listen "$S" $PORT "$srv" 20
  e2e_run_container "$label" "$C" "$CVIP" preload 60 env UCX_TLS="$tls,self" \
    UCX_NET_DEVICES=wharf0:1 ucx_perftest "$SVIP" -p $PORT -t "$test" -s "$size" -n "$iters" ||
    e2e_fail "$label: ucx_perftest exited with $?"
  e2e_wait_pid "$srv" 15
  grep -qE "^Final: +$iters " "$E2E_TMP/$label.out" || e2e_fail "$label: no final line"
}

for tls in rc_v ud_verbs; do
  for test in ucp_put_lat ucp_get tag_lat tag_bw stream_bw; do
    perftest_pair "$tls-$test" "$tls" "$test" 4096 1000
  done
done

# libfabric: the verbs provider lists wharf0 for both endpoint types and pings over them.
e2e_run_container fi-info "$S" "$SVIP" preload 30 sh -c \
  'fi_info -p verbs -t FI_EP_MSG; fi_info -p verbs -t FI_EP_RDM' || e2e_fail "fi_info exited with $?"
[[ $(grep -c "domain: wharf0$" "$E2E_TMP/fi-info.out") -ge 2 ]] || e2e_fail "fi_info lists no wharf0"
for ep in msg rdm; do
  e2e_start_container "fi-$ep-srv" "$S" "$SVIP" preload fi_pingpong -p verbs -e $ep -S 4096 \
    -I 500 -B 47800
  srv=$E2E_LAST_PID
  e2e_wait_listen "$S" 47800 "$srv" 20
  e2e_run_container "fi-$ep" "$C" "$CVIP" preload 60 fi_pingpong -p verbs -e $ep -S 4096 \
    -I 500 -P 47800 "$SVIP" || e2e_fail "fi_pingpong -e $ep exited with $?"
  e2e_wait_pid "$srv" 15
  grep -qE "^4k +500 +=500 " "$E2E_TMP/fi-$ep.out" || e2e_fail "fi_pingpong -e $ep: no result"
done

# As in a pod whose runtime could not mount the sysfs view (docs/OPERATIONS.md, "Kubernetes"):
# with /sys/class/infiniband and /sys/class/infiniband_verbs hidden, UCX and libfabric still
# find wharf0 and its transports (they find devices through libibverbs).
# shellcheck disable=SC2016  # the inner shell expands it
e2e_run_container no-sysfs "$S" "$SVIP" preload 30 sh -c \
  'mount -t tmpfs none /sys/class/infiniband && mount -t tmpfs none /sys/class/infiniband_verbs &&
   test -z "$(ls /sys/class/infiniband)" && ucx_info -d && fi_info -p verbs -t FI_EP_RDM' ||
  e2e_fail "no-sysfs: exited with $?"
for want in "Transport: rc_verbs" "Transport: ud_verbs" "domain: wharf0$"; do
  grep -qE "$want" "$E2E_TMP/no-sysfs.out" || e2e_fail "no-sysfs: no '$want' without the sysfs view"
done

# Two ranks in one container, UCX restricted to wharf0 (no shared memory).
mpicc -O2 -o "$E2E_TMP/mpi_pingpong" "$HERE/mpi_pingpong.c" || e2e_fail "mpicc"
MPI=(mpirun --allow-run-as-root --oversubscribe --mca pml ucx --mca btl ^openib,uct --mca osc ucx
  -x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=wharf0:1)
e2e_run_container mpi-one "$S" "$SVIP" preload 60 "${MPI[@]}" -np 2 "$E2E_TMP/mpi_pingpong" ||
  e2e_fail "mpirun in one container exited with $?"
grep -q "^mpi_pingpong: ok" "$E2E_TMP/mpi-one.out" || e2e_fail "MPI in one container"

# Across two lab hosts.
kill "$E2E_ROUTER_PID" 2>/dev/null
timeout 60 "$E2E_LAB" up --hosts 2 --wharfd "$E2E_BIN/wharfd" >"$E2E_TMP/lab.out" 2>&1 || e2e_fail "wharf-lab up"
for tls in rc_v ud_verbs; do
  e2e_lab_run "x-$tls-srv" h1 "$S" 198.18.1.11 60 env UCX_TLS="$tls,self" ucx_perftest -p $PORT &
  srv=$!
  for _ in $(seq 200); do ip netns exec "wharf-$S" ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && break; sleep 0.1; done
  e2e_lab_run "x-$tls" h2 "$C" 198.18.2.12 60 env UCX_TLS="$tls,self" ucx_perftest 198.18.1.11 \
    -p $PORT -t tag_bw -s 1048576 -n 100 || e2e_fail "x-$tls: ucx_perftest exited with $?"
  wait "$srv" || e2e_fail "x-$tls-srv exited with $?"
  grep -qE "^Final: +100 " "$E2E_TMP/x-$tls.out" || e2e_fail "x-$tls: no final line"
done

for ep in msg rdm; do
  e2e_lab_run "x-fi-$ep-srv" h1 "$S" 198.18.1.11 60 fi_pingpong -p verbs -e $ep -S 4096 -I 500 -B 47800 &
  srv=$!
  for _ in $(seq 200); do ip netns exec "wharf-$S" ss -Hltn "sport = :47800" 2>/dev/null | grep -q . && break; sleep 0.1; done
  e2e_lab_run "x-fi-$ep" h2 "$C" 198.18.2.12 60 fi_pingpong -p verbs -e $ep -S 4096 -I 500 -P 47800 \
    198.18.1.11 || e2e_fail "x-fi-$ep: fi_pingpong exited with $?"
  wait "$srv" || e2e_fail "x-fi-$ep-srv exited with $?"
  grep -qE "^4k +500 +=500 " "$E2E_TMP/x-fi-$ep.out" || e2e_fail "x-fi-$ep: no result"
done

# mpirun in h1's container starts the ranks in both through wharf-exec.
e2e_lab_run m1 h1 "$S" 198.18.1.21 60 sleep 50 &
m1=$!
e2e_lab_run m2 h2 "$C" 198.18.2.22 60 sleep 50 &
m2=$!
for _ in $(seq 100); do [[ -e /run/wharf/containers/$S && -e /run/wharf/containers/$C ]] && break; sleep 0.1; done
timeout 60 "$E2E_BIN/wharf-exec" "$S" "${MPI[@]}" --mca plm_rsh_agent "$E2E_BIN/wharf-exec" \
  -H "$S,$C" -np 2 "$E2E_TMP/mpi_pingpong" >"$E2E_TMP/mpi-x.out" 2>&1 || {
  _e2e_add_log mpi-x "$E2E_TMP/mpi-x.out"
  e2e_fail "mpirun across hosts exited with $?"
}
grep -q "^mpi_pingpong: ok" "$E2E_TMP/mpi-x.out" || e2e_fail "MPI across hosts: $(cat "$E2E_TMP/mpi-x.out")"
grep -q "ranks on $S and $C" "$E2E_TMP/mpi-x.out" || e2e_fail "the ranks did not run in both containers"
kill "$m1" "$m2" 2>/dev/null
wait "$m1" "$m2"
e2e_log "PASS"
