# shellcheck shell=bash
# Configuring and building one of the project's build trees, for scripts that make several
# (test.sh, fuzz.sh). Sourced; the sourcing script sets ROOT (the source tree), JOBS
# (parallelism) and BUILD_FAILED=() (the trees whose configure or build failed).

# How the sanitized trees' binaries run (test.sh's build-asan/, fuzz.sh's build-fuzz/): every
# report fails, leaks and stack use after return included.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

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
