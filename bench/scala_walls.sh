#!/usr/bin/env bash
# wharf-scala on wharf-lab (issue #21), five sweeps between two lab hosts, one run:
# 1. plain Wharf, ql and qr from 1 to 5000 (each router holds ql + qr QPs: up to 10,000),
#    the other dimensions at their defaults: Wharf's own walls and model;
# 2. routers emulating a 64-entry QP-context cache (wharfd --emulate qp_cache=64);
# 3. routers emulating a 256-entry MTT cache of 4 KiB pages (--emulate mtt_cache=256);
# 4. plain Wharf on Ethernet routers, the default space (networks and rules up to 1,000);
# 5. the same with sequential match lookups emulated (--emulate match=sequential).
# For each: the sweep's summary, `wharf-scala walls`, `wharf-scala fit`, and the pictures
# (`wharf-scala plot`) in OUT/NAME/ (OUT: default bench-out/scala). Takes about 10 minutes.
#
#   sudo bash bench/scala_walls.sh BUILD [OUT]    # e.g. build
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh # lab_bench_one_build (BUILD, LAB, WORK)
lab_bench_one_build scala_walls.sh scala-walls "$1"
OUT=$(readlink -f "${2:-bench-out/scala}")
mkdir -p "$OUT"
S=$BUILD/bin/wharf-scala

# sweep NAME BUDGET "WHARFD ARGS" SCALA ARGS...: a lab whose routers run with WHARFD ARGS, one
# sweep, its report.
sweep() {
  local name=$1 budget=$2 wharfd_args=$3
  shift 3
  "$LAB" down > /dev/null 2>&1 || true
  # shellcheck disable=SC2086 # the routers' arguments, split on purpose
  "$LAB" up --hosts 2 --wharfd "$BUILD/bin/wharfd" -- $wharfd_args > "$WORK/$name.lab.log" 2>&1
  timeout $((budget + 120)) "$S" sweep --local /run/wharf-lab/h1/wharfd.sock \
    --remote /run/wharf-lab/h2/wharfd.sock --budget "$budget" -o "$OUT/$name.json" "$@" \
    2> "$OUT/$name.points.log" | tee "$OUT/$name.summary.log"
  echo "== $name: walls"
  "$S" walls "$OUT/$name.json"
  echo "== $name: fit"
  "$S" fit "$OUT/$name.json"
  "$S" plot "$OUT/$name.json" -o "$OUT/$name" > /dev/null
}

echo "wharf-scala walls, $(date -u +%F), $(nproc) cores; pictures in $OUT" >&2
sweep plain 300 "" --dim ql=1,4,16,64,256,1024,2048,5000 --dim qr=1,4,16,64,256,1024,2048,5000
sweep qp_cache 120 "--emulate qp_cache=64"
sweep mtt_cache 120 "--emulate mtt_cache=256"
# On Ethernet the engine is a container of its own on each host (docs/OPERATIONS.md).
readonly ETH_VIPS=198.18.1.200,198.18.2.200
sweep plain_eth 150 "--link-layer eth" --vip "$ETH_VIPS"
sweep match 150 "--link-layer eth --emulate match=sequential" --vip "$ETH_VIPS"
