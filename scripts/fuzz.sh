#!/usr/bin/env bash
# Coverage-guided fuzzing of every fuzz target (tests/fuzz/) with libFuzzer, on demand: the
# test suite (scripts/test.sh) only runs each target's seeds and mutations of them, briefly.
# Builds build-fuzz/ (clang; everything instrumented for libFuzzer and ASan + UBSan), then
# runs the targets $JOBS at a time for $FUZZ_SECONDS each. New inputs go to a scratch corpus
# in build-fuzz/fuzz-corpus/, never into the committed seeds; a crash leaves its reproducer in
# build-fuzz/fuzz-artifacts/<target>/ and fails the run.
#
#   bash scripts/fuzz.sh                          # every target, 60 s each
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh fuzz_rc  # one target (or several), longer
#
# Environment: FUZZ_SECONDS (default 60), JOBS (default nproc). Needs clang
# (scripts/install-deps.sh installs it). Exit status 0 when no target failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
BUILD_FAILED=()
# shellcheck source-path=SCRIPTDIR source=build_trees.sh
source "$ROOT/scripts/build_trees.sh"

if ! command -v clang++ >/dev/null; then
  echo "clang++ not found (scripts/install-deps.sh installs it)"
  exit 1
fi

# finish_fuzzers <name:pid>...: waits for each and reports runs, speed and any crash.
finish_fuzzers() {
  local rc=0 entry name pid r runs eps log
  for entry in "$@"; do
    name=${entry%%:*}
    pid=${entry##*:}
    log=build-fuzz/$name.log
    r=0
    wait "$pid" || r=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    if ((r == 0)); then
      echo "$name: ${runs:-?} runs, ${eps:-?} exec/s, no failure (log: $log)"
    else
      echo "$name: FAILED (exit $r) after ${runs:-?} runs; reproducer(s):"
      find "build-fuzz/fuzz-artifacts/$name" -type f | sed 's/^/  /'
      tail -40 "$log"
      rc=1
    fi
  done
  return $rc
}

# -O1 and line tables only: all libFuzzer's reports need.
flags="-O1 -gline-tables-only -DNDEBUG"
configure build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DWHARF_LIBFUZZER=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" || exit 1
build build-fuzz wharf_fuzzers || exit 1
list=build-fuzz/fuzzers.txt
if [[ ! -s $list ]]; then
  echo "no fuzz targets listed in $list"
  exit 1
fi

rc=0
batch=()
found=0
while IFS=$'\t' read -r name bin seeds; do
  [[ -n $name ]] || continue
  if (($# > 0)) && [[ " $* " != *" $name "* ]]; then continue; fi
  found=$((found + 1))
  mkdir -p "build-fuzz/fuzz-corpus/$name" "build-fuzz/fuzz-artifacts/$name"
  "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/fuzz-artifacts/$name/" \
    "build-fuzz/fuzz-corpus/$name" "$seeds" >"build-fuzz/$name.log" 2>&1 &
  batch+=("$name:$!")
  if ((${#batch[@]} >= JOBS)); then
    finish_fuzzers "${batch[@]}" || rc=1
    batch=()
  fi
done <"$list"
if ((${#batch[@]} > 0)); then finish_fuzzers "${batch[@]}" || rc=1; fi
if ((found == 0)); then
  echo "no fuzz target named: $*"
  exit 1
fi
exit $rc
