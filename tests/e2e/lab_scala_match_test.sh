#!/usr/bin/env bash
# wharf-scala's tenant-network and match-rule dimensions on a two-host Ethernet wharf-lab
# (issue #21). With `--emulate match=sequential` on both routers every message steered pays
# for each rule a router holds (a registered container per network, a flow-steering rule per
# rule), so `walls -j` must name both networks and rules; on the same lab without emulation it
# must name neither (Wharf's own data path does not slow with either, up to 1,000 of each).
# The scans' pictures start at the baseline.
# The engine runs as a container of its own (--vip), as it must on Ethernet across hosts.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_scala_match_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail
readonly NAMES=()
e2e_lab_script lab_scala_match_test python3

S=$BIN/wharf-scala
# One configuration but for the two dimensions, so each point is one of their grid.
FIXED=(--dim ql=4 --dim qr=4 --dim size=4k --dim opcode=write --dim qp_type=rc --dim cq=shared
  --dim srq=off --dim inline=off --dim mrs=1 --dim mr_size=64k)

# sweep LABEL [wharfd options...]: a lab with those router options, a sweep of networks x rules,
# and its walls in $TMP/LABEL.walls.
sweep() {
  local label=$1
  shift
  "$LAB" down > /dev/null 2>&1
  timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" -- --link-layer eth "$@" \
    > "$TMP/$label.up.log" 2>&1 || e2e_lab_fail "wharf-lab up ($label)"
  timeout 150 "$S" sweep --local /run/wharf-lab/h1/wharfd.sock \
    --remote /run/wharf-lab/h2/wharfd.sock --vip 198.18.1.200,198.18.2.200 "${FIXED[@]}" \
    --dim networks=1,10,100,1000 --dim rules=0,10,100,1000 --budget 90 --measure 0.2 \
    -o "$TMP/$label.json" > "$TMP/$label.sweep.log" 2>&1 || e2e_lab_fail "sweep ($label)"
  if grep -q "failed:" "$TMP/$label.sweep.log"; then
    e2e_lab_fail "points failed ($label): $(grep -m3 'failed:' "$TMP/$label.sweep.log")"
  fi
  "$S" walls "$TMP/$label.json" -j > "$TMP/$label.walls" 2> "$TMP/$label.walls.log" ||
    e2e_lab_fail "walls ($label)"
}

sweep emulated --emulate match=sequential
python3 - "$TMP/emulated.walls" > "$TMP/check.log" 2>&1 << 'PY' || e2e_lab_fail "$(cat "$TMP/check.log")"
import json, sys
walls = json.load(open(sys.argv[1]))
named = {w["dimension"] for w in walls}
assert {"networks", "rules"} <= named, "emulated: want walls on networks and rules: %s" % walls
PY
# The scan's picture starts from the baseline (networks=1, measured under another phase).
"$S" plot "$TMP/emulated.json" -o "$TMP/plots" > "$TMP/plot.log" 2>&1 || e2e_lab_fail "plot"
[[ $(grep -vc '^#' "$TMP/plots/scan_networks.dat") == 4 ]] ||
  e2e_lab_fail "the networks scan's picture lacks levels: $(cat "$TMP/plots/scan_networks.dat")"
kill -USR1 "$(cat /run/wharf-lab/h1/wharfd.pid)" # the router logs its counters
sleep 0.5
grep -Eq "match_lookups=[1-9]" /run/wharf-lab/h1/wharfd.log ||
  e2e_lab_fail "the router's emulator counted no lookups"

# no_match_walls LABEL: LABEL's walls name neither networks nor rules.
no_match_walls() {
  python3 - "$TMP/$1.walls" > "$TMP/check.log" 2>&1 << 'PY'
import json, sys
walls = json.load(open(sys.argv[1]))
assert not [w for w in walls if w["dimension"] in ("networks", "rules")], "plain: %s" % walls
PY
}
# Walls are measured against the sweep's first points: a machine that slows down in the middle
# of the sweep for reasons of its own shows as a wall (in CI once: every point from the ninth on
# at half the rate, whatever its dimensions). A wall of Wharf's own shows again: one more sweep.
sweep plain
if ! no_match_walls plain; then
  echo "lab_scala_match_test: the plain sweep found walls ($(cat "$TMP/check.log")); again"
  sweep plain
  no_match_walls plain || e2e_lab_fail "$(cat "$TMP/check.log")"
fi
echo "lab_scala_match_test: PASS ($(grep -c '^\[' "$TMP/emulated.sweep.log") + $(grep -c '^\[' "$TMP/plain.sweep.log") points)"
