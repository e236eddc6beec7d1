#!/usr/bin/env bash
# What securing the links between routers costs (issue #19), in one run: cross-host
# `ib_write_bw` 1 MiB between wharf-lab hosts with `--link-security off` (A), `auth` (B,
# wharf-lab's default) and `encrypt` (C), alternating REPS times; medians, B/A and C/A; and
# the handshake times the routers logged ("authenticated in X ms", every link of every B and
# C round).
#
#   sudo bash bench/link_auth.sh BUILD [REPS]    # e.g. build
#
# Needs root (namespaces), perftest and a BUILD with bin/wharfd and bin/wharf-run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh # lab_bench_one_build (BUILD, REPS, LAB, WORK, lab_perftest), median
lab_bench_one_build link_auth.sh link-auth "$@"

# round NAME [WHARFD-OPTIONS...]: appends the MB/s of one ib_write_bw to WORK/NAME.
round() {
  local name=$1
  shift
  "$LAB" up --hosts 2 --wharfd "$BUILD/bin/wharfd" -- "$@" > "$WORK/up.log"
  lab_perftest "$BUILD" 4 ib_write_bw -d wharf0 -s 1048576 -n 2000 >> "$WORK/$name"
  grep -ho "authenticated in [0-9.]* ms" /run/wharf-lab/h*/wharfd.log | awk '{print $3}' \
    >> "$WORK/handshakes" || true
  "$LAB" down > /dev/null
}

echo "Measuring ($REPS rounds of each, alternating) ..." >&2
: > "$WORK/handshakes"
for _ in $(seq "$REPS"); do
  round a --link-security off
  round b
  round c --link-security encrypt
done
va=$(median < "$WORK/a")
vb=$(median < "$WORK/b")
vc=$(median < "$WORK/c")
ratio() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", y / x}'; }
echo "| ib_write_bw 1 MiB between hosts, MB/s (median of $REPS) | A: --link-security off | B: auth | C: encrypt | B/A | C/A |"
echo "|---|---|---|---|---|---|"
echo "| $BUILD | $va | $vb | $vc | $(ratio "$va" "$vb") | $(ratio "$va" "$vc") |"
echo "handshakes (ms, $(wc -l < "$WORK/handshakes") links): median $(median < "$WORK/handshakes")," \
  "max $(sort -g "$WORK/handshakes" | tail -1)"
