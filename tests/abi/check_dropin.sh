#!/bin/bash
# Checks that unmodified Debian RDMA binaries load against our libraries, without running them.
#
#   drop-in:  LD_LIBRARY_PATH=LIBDIR    libibverbs.so.1, libmlx5.so.1 and libefa.so.1 must all
#             resolve into LIBDIR (ours and the stubs).
#   preload:  LD_PRELOAD=LIBDIR/libibverbs.so.1   ours replaces Debian's libibverbs entirely,
#             while Debian's libmlx5/libefa/librdmacm still load and bind to it (they import
#             IBVERBS_PRIVATE_34 symbols).
# In both, `ldd -r` performs every data and function relocation, so a missing symbol or version
# node anywhere (in the binary or in a Debian library bound to ours) fails the test.
#
# Usage: check_dropin.sh LIBDIR [BINARY...]   (default binaries: ib_send_bw ibv_devinfo rping)
# Exits 77 (CTest SKIP_RETURN_CODE) when none of the binaries is installed.
set -uo pipefail

libdir=$(realpath "$1")
shift
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(ib_send_bw ibv_devinfo rping)

status=0
checked=0
bin_failed=0
fail() {
  echo "FAIL: $*"
  status=1
  bin_failed=1
}

# where <ldd output> <soname>: the path the soname resolved to, or empty.
where() { awk -v lib="$2" '$1 == lib && $2 == "=>" { print $3 }' <<<"$1"; }

check_clean() {
  local mode=$1 bin=$2 out=$3
  if grep -E 'not found|undefined symbol|symbol lookup error' <<<"$out"; then
    fail "$mode $bin: unresolved libraries, versions or symbols (above)"
  fi
}

for name in "${names[@]}"; do
  bin=$(command -v "$name") || { echo "skip: $name not installed"; continue; }
  checked=$((checked + 1))
  bin_failed=0

  out=$(LD_LIBRARY_PATH=$libdir ldd -r "$bin" 2>&1)
  check_clean drop-in "$bin" "$out"
  for lib in libibverbs.so.1 libmlx5.so.1 libefa.so.1; do
    needed=$(readelf -d "$bin" | grep -c "Shared library: \[$lib\]")
    [[ $lib == libibverbs.so.1 || $needed -gt 0 ]] || continue
    path=$(where "$out" "$lib")
    [[ $(dirname "$path") == "$libdir" ]] ||
      fail "drop-in $bin: $lib resolved to '${path:-nothing}', expected $libdir/$lib"
  done

  out=$(LD_PRELOAD=$libdir/libibverbs.so.1 ldd -r "$bin" 2>&1)
  check_clean preload "$bin" "$out"
  if grep -E '^\s*libibverbs\.so\.1 => ' <<<"$out" | grep -v -F "$libdir/" >/dev/null; then
    fail "preload $bin: Debian's libibverbs.so.1 was loaded beside ours"
  fi
  grep -q -F "$libdir/libibverbs.so.1" <<<"$out" ||
    fail "preload $bin: $libdir/libibverbs.so.1 not loaded"

  [[ $bin_failed -eq 0 ]] && echo "OK: $bin loads drop-in and preloaded"
done

if [[ $checked -eq 0 ]]; then
  echo "none of ${names[*]} is installed"
  exit 77
fi
exit $status
