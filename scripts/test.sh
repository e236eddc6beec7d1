#!/usr/bin/env bash
# Wharf's whole test suite: what CI runs (.ci/run) and what a new user runs, as root, on a fresh
# Debian 12. Each step is timed; a failing step is recorded and the later steps still run.
#
#   deps        scripts/install-deps.sh
#   build       build/ (RelWithDebInfo): configure and build everything (keep going on errors)
#   test        ctest on build/: everything but label `e2e` in parallel, then `e2e` with -j1
#               (end-to-end tests share network namespaces, so never two at once)
#   asan-build  build-asan/ (Sanitize = ASan + UBSan): configure and build
#   asan-test   ctest on build-asan/: everything but labels `e2e` and `nosan` (and the fuzz
#               targets' replays when the fuzz step runs)
#   fuzz        build-fuzz/ (clang, libFuzzer): every fuzz target for $FUZZ_SECONDS each
#   format      clang-format --dry-run --Werror over the C++ sources
#   tidy        clang-tidy (.clang-tidy) over the project's own sources, tests excluded
#
# Exits non-zero if any step failed. Ends with a summary table and a closing line
# "tests: N passed, M failed" totalling every ctest run.
#
# Environment: JOBS (parallelism, default nproc), FUZZ_SECONDS (default 10),
# WHARF_SKIP="asan-build asan-test ..." skips steps by name (for local iteration only).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
SKIP=" ${WHARF_SKIP:-} "
CTEST_TIMEOUT=120  # default per-test limit (s) for tests that set no TIMEOUT property
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

STEP_NAMES=()
STEP_RESULTS=()
STEP_TIMES=()
TESTS_PASSED=0
TESTS_FAILED=0
BUILD_FAILED=()  # build dirs whose configure or build failed

# step <name> <command...>: runs a step; exit status 77 means "skipped".
step() {
  local name=$1
  shift
  STEP_NAMES+=("$name")
  if [[ $SKIP == *" $name "* ]]; then
    STEP_RESULTS+=("SKIP")
    STEP_TIMES+=(0)
    echo "==> [$name] skipped (WHARF_SKIP)"
    return
  fi
  echo
  echo "==> [$name] started $(date +%H:%M:%S)"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  local dt=$((SECONDS - t0)) result
  case $rc in
    0) result=PASS ;;
    77) result=SKIP ;;
    *) result=FAIL ;;
  esac
  STEP_RESULTS+=("$result")
  STEP_TIMES+=("$dt")
  echo "==> [$name] $result in ${dt}s"
}

# configure <dir> <cmake args...>: Ninja for new trees, whatever generator an old tree used.
configure() {
  local dir=$1
  shift
  local gen=()
  if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
  mkdir -p "$dir"
  if ! cmake -S "$ROOT" -B "$dir" "${gen[@]}" "$@" >"$dir/wharf-configure.log" 2>&1; then
    cat "$dir/wharf-configure.log"
    echo "configure of $dir failed"
    BUILD_FAILED+=("$dir")
    return 1
  fi
}

# build <dir> [target...]: builds, continuing past failing targets so that everything that can
# be built is, and the tests of what could not show up as failures.
build() {
  local dir=$1
  shift
  local targets=() keep=(-- -k)
  if (($# > 0)); then targets=(--target "$@"); fi
  if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt" 2>/dev/null; then
    keep=(-- -k 0)
  fi
  if cmake --build "$dir" -j "$JOBS" "${targets[@]}" "${keep[@]}" >"$dir/wharf-build.log" 2>&1
  then
    echo "built $dir${1:+ (targets: $*)}"
    return 0
  fi
  echo "build of $dir failed; first errors (full log: $dir/wharf-build.log):"
  grep -E -A3 'error|FAILED:|\*\*\*' "$dir/wharf-build.log" | head -150
  BUILD_FAILED+=("$dir")
  return 1
}

# run_ctest <dir> <ctest args...>: prints ctest's own output and summary; adds to the totals.
run_ctest() {
  local dir=$1
  shift
  local out rc
  out=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure --timeout "$CTEST_TIMEOUT" "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  local line total failed
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -1)
  if [[ -n $line ]]; then
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
    total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
    TESTS_PASSED=$((TESTS_PASSED + total - failed))
    TESTS_FAILED=$((TESTS_FAILED + failed))
  elif ((rc != 0)); then
    TESTS_FAILED=$((TESTS_FAILED + 1))  # ctest itself failed (e.g. no such build tree)
  fi
  rm -f "$out"
  return "$rc"
}

count_tests() {  # count_tests <dir> <ctest selection...>
  local dir=$1
  shift
  ctest --test-dir "$dir" -N "$@" 2>/dev/null | sed -n 's/^Total Tests: //p'
}

# ---- steps ----

do_deps() { bash "$ROOT/scripts/install-deps.sh"; }

do_build() {
  configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWHARF_TESTS=ON || return 1
  build build
}

do_test() {
  local rc=0
  if [[ $(count_tests build -LE '^e2e$') -eq 0 ]]; then
    echo "no tests registered in build/: a suite that runs nothing has failed"
    return 1
  fi
  run_ctest build -j "$JOBS" -LE '^e2e$' || rc=1
  local n
  n=$(count_tests build -L '^e2e$')
  if [[ ${n:-0} -gt 0 ]]; then
    echo
    echo "---- e2e tests, one at a time ----"
    run_ctest build -j 1 -L '^e2e$' || rc=1
  else
    echo "(no e2e tests registered)"
  fi
  return $rc
}

# Only what the sanitized tests run (wharf_sanitized_tests: test binaries, the libraries and
# wharfd they load or start), without the tools and bench helpers no sanitized test runs. A
# test whose binary is missing fails in asan-test, so the list cannot silently fall short.
# The fuzz targets and their seed replays are left out when the fuzz step runs: it runs the
# same targets from the same seeds and beyond, under the same sanitizers.
do_asan_build() {
  local fuzz=ON
  if fuzz_step_runs; then fuzz=OFF; fi
  configure build-asan -DCMAKE_BUILD_TYPE=Sanitize -DWHARF_TESTS=ON -DWHARF_BENCH=OFF \
    -DWHARF_FUZZ_TARGETS=$fuzz || return 1
  build build-asan wharf_sanitized_tests
}

# Tests labelled `nosan` load our libraries into uninstrumented system binaries, which the
# sanitizer runtimes do not allow; they run in the optimized tree only.
do_asan_test() { run_ctest build-asan -j "$JOBS" -LE '^(e2e|nosan)$'; }

fuzz_step_runs() { [[ $SKIP != *" fuzz "* ]] && command -v clang++ >/dev/null; }

do_fuzz() {
  if ! command -v clang++ >/dev/null; then
    echo "clang++ not found: fuzzing skipped (scripts/install-deps.sh installs it)"
    return 77
  fi
  # -O1 and line tables only: all libFuzzer's reports need (control/api.cc compiled in 29 s
  # against 33 s; the whole tree's time moved less than the machine's noise).
  local flags="-O1 -gline-tables-only -DNDEBUG"
  configure build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DWHARF_LIBFUZZER=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" || return 1
  build build-fuzz wharf_fuzzers || return 1
  local list=build-fuzz/fuzzers.txt
  if [[ ! -s $list ]]; then
    echo "no fuzz targets listed in $list"
    return 1
  fi
  # Up to $JOBS fuzzers at a time, each for $FUZZ_SECONDS; new inputs go to a scratch corpus
  # in build-fuzz/, never into the committed seeds.
  local rc=0 batch=() name bin seeds
  while IFS=$'\t' read -r name bin seeds; do
    [[ -n $name ]] || continue
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
  return $rc
}

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

source_files() {  # the C++ sources clang-format checks, one per line
  if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.hpp' '*.cpp'
  else
    find . -type f \( -name '*.h' -o -name '*.cc' -o -name '*.hpp' -o -name '*.cpp' \) |
      sed 's|^\./||'
  fi | grep -Ev '^(build[^/]*|third_party|\.cache)/' | sort -u
}

do_format() {
  if ! command -v clang-format >/dev/null; then
    echo "clang-format not found"
    return 1
  fi
  local files=()
  mapfile -t files < <(source_files)
  ((${#files[@]} > 0)) || return 0
  local out
  if out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
    echo "${#files[@]} files formatted as .clang-format says"
    return 0
  fi
  echo "$out" | head -100
  echo "not formatted (fix with: clang-format -i FILE...):"
  grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$out" | cut -d: -f1 | sort -u | sed 's/^/  /'
  return 1
}

do_tidy() {
  if ! command -v clang-tidy >/dev/null; then
    echo "clang-tidy not found"
    return 1
  fi
  local db=build/compile_commands.json
  if [[ ! -f $db ]]; then
    echo "no $db (the build step did not configure)"
    return 1
  fi
  local files=()
  mapfile -t files < <(sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$db" | sort -u |
    grep -F "$ROOT/" | grep -Ev "^$ROOT/(tests|build[^/]*)/")
  if ((${#files[@]} == 0)); then
    echo "no sources in $db"
    return 1
  fi
  local log=build/wharf-tidy.log
  printf '%s\0' "${files[@]}" |
    xargs -0 -P "$JOBS" -n 4 clang-tidy -p build --quiet >"$log" 2>&1
  local rc=$?
  if grep -qE '(warning|error): ' "$log"; then
    grep -E -A2 '(warning|error): ' "$log" | head -150
    echo "clang-tidy findings above (full log: $log)"
    return 1
  fi
  if ((rc != 0)); then
    tail -50 "$log"
    return 1
  fi
  echo "${#files[@]} files clean"
}

# ---- run ----

T0=$SECONDS
step deps do_deps
step build do_build
step test do_test
step asan-build do_asan_build
step asan-test do_asan_test
step fuzz do_fuzz
step format do_format
step tidy do_tidy

echo
echo "==================== summary ===================="
failed_steps=()
for i in "${!STEP_NAMES[@]}"; do
  printf '  %-11s %-5s %5ss\n' "${STEP_NAMES[$i]}" "${STEP_RESULTS[$i]}" "${STEP_TIMES[$i]}"
  [[ ${STEP_RESULTS[$i]} == FAIL ]] && failed_steps+=("${STEP_NAMES[$i]}")
done
echo "  total time  $((SECONDS - T0))s"
if ((${#BUILD_FAILED[@]} > 0)); then
  echo "  build failures in: ${BUILD_FAILED[*]} (tests of unbuilt targets count as failed)"
fi
if ((${#failed_steps[@]} > 0)); then
  echo "  FAILED steps: ${failed_steps[*]}"
else
  echo "  all steps passed"
fi
echo "tests: ${TESTS_PASSED} passed, ${TESTS_FAILED} failed"
((${#failed_steps[@]} == 0))
