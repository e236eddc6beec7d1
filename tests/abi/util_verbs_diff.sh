#!/bin/bash
# Differential test of libibverbs' self-contained helpers: runs util_verbs_probe against Debian's
# libibverbs.so.1 and against ours, with and without $SYSFS_PATH, and fails with a diff when the
# outputs differ. Usage: util_verbs_diff.sh PROBE OUR_LIBDIR DEBIAN_LIBDIR
set -euo pipefail

probe=$1 ours=$2 debian=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# run <name> <libdir> [env...]: output of the probe in $scratch/<name>.out; checks who served it.
run() {
  local name=$1 libdir=$2
  shift 2
  mkdir -p "$scratch/$name.d"
  env "$@" LD_LIBRARY_PATH="$libdir" "$probe" "$scratch/$name.d" >"$scratch/$name.out" \
    2>"$scratch/$name.err"
  local served
  served=$(sed -n 's/^libibverbs: //p' "$scratch/$name.err")
  if [[ $(realpath "$(dirname "$served")") != $(realpath "$libdir") ]]; then
    echo "FAIL: run '$name' was served by '$served', not by a library in $libdir"
    exit 1
  fi
}

status=0
for mode in plain sysfs_env; do
  envs=(-u SYSFS_PATH)
  [[ $mode == sysfs_env ]] && envs=(SYSFS_PATH=/custom//sysfs-root///)
  run "debian-$mode" "$debian" "${envs[@]}"
  run "ours-$mode" "$ours" "${envs[@]}"
  # The scratch directory name differs between runs but never appears in the output.
  if diff -u --label "debian ($mode)" --label "ours ($mode)" \
      "$scratch/debian-$mode.out" "$scratch/ours-$mode.out"; then
    echo "OK ($mode): $(wc -l <"$scratch/ours-$mode.out") lines identical"
  else
    status=1
  fi
done
exit $status
