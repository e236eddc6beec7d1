#!/usr/bin/env bash
# Wharf's whole test suite: what CI runs (.ci/run) and what a new user runs, as root, on a fresh
# Debian 12. Each step is timed; a failing step is recorded and the later steps still run.
#
#   deps        scripts/install-deps.sh
#   build       build/ (RelWithDebInfo): configure and build everything but the unit tests
#               (keep going on errors)
#   test        ctest on build/: everything but label `e2e` in parallel, then `e2e` with -j1
#               (end-to-end tests share network namespaces, so never two at once)
#   asan-build  build-asan/ (Sanitize = ASan + UBSan): configure and build what its tests run
#   asan-test   ctest on build-asan/: everything but labels `e2e` and `nosan`: the unit tests
#               (here only: their copies in build/ were 77 of its 325 compilations and a
#               minute of tests), the verifier, and the fuzz targets, briefly: each runs its
#               seeds and mutations of them (label `fuzz`)
#   format      clang-format --dry-run --Werror over the C++ sources
#   tidy        clang-tidy (.clang-tidy) over the project's own sources, tests excluded; the
#               static analyzer over the router's and libraries' code only
#
# Coverage-guided fuzzing (libFuzzer, minutes per target) is scripts/fuzz.sh, run on demand:
# its clang tree took 370 s to build and its 10 s per target 150 s more, a sixth of CI.
#
# Exits non-zero if any step failed. Ends with a summary table and a closing line
# "tests: N passed, M failed" totalling every ctest run.
#
# Environment: JOBS (parallelism, default nproc); WHARF_SKIP="asan-build asan-test ..." skips
# steps by name (for local iteration only).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
SKIP=" ${WHARF_SKIP:-} "
CTEST_TIMEOUT=120  # default per-test limit (s) for tests that set no TIMEOUT property

STEP_NAMES=()
STEP_RESULTS=()
STEP_TIMES=()
TESTS_PASSED=0
TESTS_FAILED=0
BUILD_FAILED=()  # build dirs whose configure or build failed (build_trees.sh adds to it)
# shellcheck source-path=SCRIPTDIR source=build_trees.sh
source "$ROOT/scripts/build_trees.sh"

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

# build/ is also the tree README's demo and the acceptance checks use; `cmake -S . -B build
# -DWHARF_UNIT_TESTS=ON` brings its unit tests back.
do_build() {
  configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWHARF_TESTS=ON -DWHARF_UNIT_TESTS=OFF ||
    return 1
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

# Only what the sanitized tests run (wharf_sanitized_tests: test binaries, the fuzz targets,
# the libraries and wharfd they load or start), without the tools and bench helpers no
# sanitized test runs. A test whose binary is missing fails in asan-test, so the list cannot
# silently fall short.
do_asan_build() {
  configure build-asan -DCMAKE_BUILD_TYPE=Sanitize -DWHARF_TESTS=ON -DWHARF_BENCH=OFF || return 1
  build build-asan wharf_sanitized_tests
}

# Tests labelled `nosan` load our libraries into uninstrumented system binaries, which the
# sanitizer runtimes do not allow; they run in the optimized tree only.
do_asan_test() { run_ctest build-asan -j "$JOBS" -LE '^(e2e|nosan)$'; }

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
  # The static analyzer's path exploration is half of clang-tidy's time (router.cc: 18 s, 8 s
  # without it): it explores the router's and the libraries' code (src/, abi/, daemons/),
  # which takes hostile input and runs inside applications; the tools' and bench/'s code
  # gets every other check.
  local explored=() matched=() f
  for f in "${files[@]}"; do
    if [[ $f == "$ROOT"/tools/* || $f == "$ROOT"/bench/* ]]; then
      matched+=("$f")
    else
      explored+=("$f")
    fi
  done
  local log=build/wharf-tidy.log rc=0
  : >"$log"
  if ((${#explored[@]} > 0)); then
    printf '%s\0' "${explored[@]}" |
      xargs -0 -P "$JOBS" -n 4 clang-tidy -p build --quiet >>"$log" 2>&1 || rc=1
  fi
  if ((${#matched[@]} > 0)); then
    printf '%s\0' "${matched[@]}" |
      xargs -0 -P "$JOBS" -n 4 clang-tidy -p build --quiet --checks='-clang-analyzer-*' \
        >>"$log" 2>&1 || rc=1
  fi
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
