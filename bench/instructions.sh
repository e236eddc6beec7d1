#!/usr/bin/env bash
# Instructions the routers execute per cross-host 64 B SEND (issue #18: halved against main),
# counted by callgrind, for builds A and B in one run.
#
#   sudo bash bench/instructions.sh BUILD_A BUILD_B [N] [REPS]    # e.g. /tmp/build-main build
#
# Both lab routers run under callgrind with --spin-us 0 (a router that polls while idle would
# count its polling). ib_send_lat -s 64 runs between a container on h2 and one on h1 three
# times: 500 iterations, N (default 2500), 500 again; each router's counters are dumped after
# each run. Each iteration is two SENDs (one each way), so
#   instructions per SEND = (Ir of the N run - Ir of the second 500 run) / (2 (N - 500)),
# both routers summed: what connecting, perftest's set-up and the first run's warm-up cost
# cancels. How many passes (and wake-ups) a message takes varies from run to run, so the
# builds take turns REPS times (default 5) and the medians are compared. Needs root, perftest and valgrind; each build dir needs bin/wharfd, bin/wharf-run
# and lib/libibverbs.so.1 (say which build type in the results).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$(readlink -f "$1")
B=$(readlink -f "$2")
N=${3:-2500}
REPS=${4:-5}
LAB=$PWD/tools/wharf-lab/wharf-lab
. bench/lib.sh  # median, lab_bench_checks, lab_bench_work
lab_bench_checks instructions.sh "$A" "$B"
command -v valgrind > /dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 1; }
((N > 500)) || { echo "instructions.sh: N must be above 500" >&2; exit 1; }
lab_bench_work instr

. "$PWD/bench/lab_perftest.sh"

# dump_all: dumps both routers' counters (and zeroes them): callgrind.PID.1, .2, ... in turn.
dump_all() {
  local k
  for k in 1 2; do callgrind_control -d "$(cat "/run/wharf-lab/h$k/wharfd.pid")" > /dev/null 2>&1; done
}

# instructions DUMP: both routers' instructions in dump number DUMP.
instructions() {
  local total=0 f
  for f in "$WORK"/callgrind.*."$1"; do
    total=$((total + $(awk '/^(summary|totals):/ {print $2; exit}' "$f")))
  done
  echo "$total"
}

# measure BUILD: prints the instructions per SEND of BUILD's routers.
measure() {
  local build=$1
  rm -f "$WORK"/callgrind.*
  cat > "$WORK/wharfd" << EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind.%p "$build/bin/wharfd" "\$@"
EOF
  chmod +x "$WORK/wharfd"
  "$LAB" up --hosts 2 --wharfd "$WORK/wharfd" -- --spin-us 0 > "$WORK/up.log"
  local iters
  for iters in 500 "$N" 500; do
    lab_perftest "$build" 1 ib_send_lat -s 64 -n "$iters" -u 19 > /dev/null
    dump_all
  done
  "$LAB" down > /dev/null
  # Dump 1: start-up and the first 500; 2: the N run; 3: the second 500.
  awk -v b="$(instructions 2)" -v s="$(instructions 3)" -v n="$N" \
    'BEGIN {printf "%.0f", (b - s) / (2 * (n - 500))}'
}

echo "Measuring (callgrind, N = $N, $REPS rounds) ..." >&2
for _ in $(seq "$REPS"); do
  measure "$A" >> "$WORK/a"
  echo >> "$WORK/a"
  measure "$B" >> "$WORK/b"
  echo >> "$WORK/b"
done
ia=$(median < "$WORK/a")
ib=$(median < "$WORK/b")
echo "| build | router instructions per cross-host 64 B SEND (both routers): each round | median |"
echo "|---|---|---|"
echo "| A $A | $(paste -sd, "$WORK/a" | sed 's/,/, /g') | $ia |"
echo "| B $B | $(paste -sd, "$WORK/b" | sed 's/,/, /g') | $ib |"
awk -v a="$ia" -v b="$ib" 'BEGIN {printf "B/A = %.2f\n", b / a}'
