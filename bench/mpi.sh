#!/usr/bin/env bash
# Open MPI between containers on two wharf-lab hosts (issue #17's goal: a 64 KiB ping-pong
# over Wharf at least as fast as Open MPI's own TCP transport, >= 1.0x), side by side in one
# run: pml ucx over wharf0 (UCX_TLS=rc_v) against pml ob1 with the tcp BTL, and against pml
# ucx over UCX's TCP transport, between the same two containers. mpirun runs in h1's
# container and starts the ranks through wharf-exec.
# Usage: sudo bash bench/mpi.sh [BUILD_BIN_DIR] [SIZE]   (defaults build/bin, 65536)
set -uo pipefail
BIN=$(cd "${1:-build/bin}" && pwd) || exit 1
SIZE=${2:-65536}
command -v mpicc >/dev/null || { echo "mpicc missing (apt-get install libopenmpi-dev)"; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d /tmp/wharf-bench-mpi.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  "$BIN/wharf-lab" down >/dev/null 2>&1
  rm -rf "$TMP"
}
trap cleanup EXIT

mpicc -O2 -o "$TMP/pingpong" "$HERE/mpi_pingpong_timed.c" || exit 1
"$BIN/wharf-lab" down >/dev/null 2>&1
"$BIN/wharf-lab" up --hosts 2 --wharfd "$BIN/wharfd" >"$TMP/lab.log" 2>&1 || { cat "$TMP/lab.log"; exit 1; }
# Two long-lived containers, one per host, that mpirun's ranks join.
for h in 1 2; do
  timeout 600 "$BIN/wharf-run" --router "/run/wharf-lab/h$h/wharfd.sock" --name "bmpi$h" \
    --vip "198.18.$h.41" -- sleep 590 </dev/null >/dev/null 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 100); do [[ -e /run/wharf/containers/bmpi1 && -e /run/wharf/containers/bmpi2 ]] && break; sleep 0.1; done
# Every "host" is this machine: binding would put both ranks on core 0.
COMMON=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca plm_rsh_agent "$BIN/wharf-exec"
  -H bmpi1,bmpi2 -np 2)
run() { # LABEL MPIRUN-ARGS... -> prints "LAT BW" from the pingpong's line
  timeout 120 "$BIN/wharf-exec" bmpi1 "${COMMON[@]}" "$@" "$TMP/pingpong" "$SIZE" 2000 2>"$TMP/err" |
    awk '/^mpi_pingpong/ {print $4, $8}'
}
read -r lat_w bw_w <<<"$(run --mca pml ucx --mca btl ^openib,uct --mca osc ucx \
  -x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=wharf0:1)"
read -r lat_t bw_t <<<"$(run --mca pml ob1 --mca btl tcp,self --mca osc ^ucx)"
# A second TCP baseline: the same pml ucx over UCX's own TCP transport.
read -r lat_u bw_u <<<"$(run --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
  --mca btl ^openib,uct --mca osc ucx -x UCX_TLS=tcp,self)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
echo "| measure | pml ucx on Wharf (rc_v) | tcp BTL (ob1) | ratio | pml ucx over UCX tcp | ratio | goal |"
echo "|---|---|---|---|---|---|---|"
echo "| across hosts: ping-pong $SIZE B (MB/s) | ${bw_w:-failed} | ${bw_t:-failed} | $(ratio "${bw_w:-0}" "${bw_t:-0}") | ${bw_u:-failed} | $(ratio "${bw_w:-0}" "${bw_u:-0}") | >= 1.0 vs tcp BTL |"
echo "| across hosts: ping-pong $SIZE B one way (us) | ${lat_w:-failed} | ${lat_t:-failed} | $(ratio "${lat_w:-0}" "${lat_t:-0}") | ${lat_u:-failed} | $(ratio "${lat_w:-0}" "${lat_u:-0}") | |"
[[ -n ${bw_w:-} && -n ${bw_t:-} && -n ${bw_u:-} ]] || { echo "a run failed:"; cat "$TMP/err"; exit 1; }
