#!/usr/bin/env bash
# A/B of two builds of Wharf between lab hosts, in one run: the same perftest figures with
# build A's routers and library, then build B's, alternating REPS times; medians and B/A.
#
#   sudo bash bench/ab_hosts.sh BUILD_A BUILD_B [REPS]    # e.g. build-main build
#
# Figures (client in a container on h2, server on h1; 64 B unless said):
# - ib_send_lat typical (us), ib_write_bw 64 B (MB/s, i.e. message rate), ib_write_bw 64 KiB.
# Each build dir needs bin/wharfd, bin/wharf-run and lib/libibverbs.so.1 (any build type;
# say which in the results). Needs root (namespaces) and perftest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$(readlink -f "$1")
B=$(readlink -f "$2")
REPS=${3:-3}
LAB=$PWD/tools/wharf-lab/wharf-lab
. bench/lib.sh  # lab_bench_checks, lab_bench_work, ab_rounds, ab_table
lab_bench_checks ab_hosts.sh "$A" "$B"
lab_bench_work ab

. "$PWD/bench/lab_perftest.sh"
perftest() { lab_perftest "$@"; }

# One round with BUILD's routers: appends "lat bw64 bw64k" to WORK/BUILD-NAME.
round() {
  local build=$1 name=$2
  "$LAB" up --hosts 2 --wharfd "$build/bin/wharfd" > "$WORK/up.log"
  echo "$(perftest "$build" 5 ib_send_lat -d wharf0 -s 64 -n 5000)" \
    "$(perftest "$build" 4 ib_write_bw -d wharf0 -s 64 -n 200000)" \
    "$(perftest "$build" 4 ib_write_bw -d wharf0 -s 65536 -n 20000)" >> "$WORK/$name"
  "$LAB" down > /dev/null
}

ab_rounds round "$REPS"
ab_table "$A" "$B" "$REPS" "ib_send_lat 64 B typical (us)" "ib_write_bw 64 B (MB/s)" "ib_write_bw 64 KiB (MB/s)"
