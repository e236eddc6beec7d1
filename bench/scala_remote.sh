#!/usr/bin/env bash
# wharf-scala between two hosts (issue #21), one run: the same small sweep between two lab
# hosts' routers with both halves in one process (`--remote SOCK`) and with the remote half
# in `wharf-scala serve` (`--remote HOST:PORT`), on routers with express lines (the default)
# and without (`--express off`). Prints, per configuration, bandwidth and p50 of each point
# and the ratio of the two-process figures to the one-process ones. About 2 minutes.
#
#   sudo bash bench/scala_remote.sh BUILD [REPS]    # e.g. build
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh # lab_bench_one_build (BUILD, REPS, LAB, WORK), median
lab_bench_one_build scala_remote.sh scala-remote "$1" "${2:-3}"
S=$BUILD/bin/wharf-scala
AGENT=127.0.0.1:18515
# shellcheck disable=SC2054 # the commas are --dim's, not the array's
DIMS=(--dim ql=4 --dim qr=4 --dim size=64,4k --dim opcode=send,write --dim qp_type=rc
  --dim cq=shared --dim srq=off --dim inline=off --dim mrs=1 --dim mr_size=64k
  --dim networks=1 --measure 0.5)
bench_cleanup() { pkill -f "wharf-scala serve --device /run/wharf-lab" || true; }

# run LABEL REMOTE: one sweep; appends "LABEL size opcode bw p50" lines to $WORK/figures.
run() {
  "$S" sweep --local /run/wharf-lab/h1/wharfd.sock --remote "$2" "${DIMS[@]}" \
    -o "$WORK/$1.json" > /dev/null 2>&1
  python3 - "$WORK/$1.json" "$1" >> "$WORK/figures" << 'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    c = p["config"]
    if p["ok"]:
        print(sys.argv[2], c["size"], c["opcode"], p["bw_gbps"], p["lat_p50_us"])
PY
}

for express in on off; do
  "$LAB" down > /dev/null 2>&1 || true
  "$LAB" up --hosts 2 --wharfd "$BUILD/bin/wharfd" -- --express "$express" > "$WORK/lab.log" 2>&1
  "$S" serve --device /run/wharf-lab/h2/wharfd.sock --listen "$AGENT" > "$WORK/serve.log" 2>&1 &
  sleep 1
  for _ in $(seq "$REPS"); do
    run "one-$express" /run/wharf-lab/h2/wharfd.sock
    run "two-$express" "$AGENT"
  done
  bench_cleanup
done

echo "| express lines | message | one process: Gb/s, p50 us | two processes: Gb/s, p50 us | two/one (Gb/s) |"
echo "|---|---|---|---|---|"
for express in on off; do
  for point in "64 send" "4k send" "64 write" "4k write"; do
    fig() { awk -v l="$1" -v p="$point" -v c="$2" '$1 == l && ($2 " " $3) == p {print $c}' \
      "$WORK/figures" | median; }
    b1=$(fig "one-$express" 4) l1=$(fig "one-$express" 5)
    b2=$(fig "two-$express" 4) l2=$(fig "two-$express" 5)
    printf "| %s | %s | %.2f, %.0f | %.2f, %.0f | %.2f |\n" "$express" "$point" "$b1" "$l1" \
      "$b2" "$l2" "$(awk -v a="$b2" -v b="$b1" 'BEGIN {print a / b}')"
  done
done
