#!/usr/bin/env bash
# wharf-scala on a two-host wharf-lab whose routers emulate a 16-entry QP-context cache (issue
# #21): a small sweep within its budget, reporting how many points ran against the full
# factorial; `walls -j` finds the wall on a QP dimension where ql + qr first exceeds 16 (ql 16,
# with qr at its baseline 4) and on no memory dimension; `fit -j` fits the LAT plane (a, b > 0);
# `plot` draws PNG and SVG pictures; a file that is not a sweep is refused.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_scala_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail
readonly NAMES=()
e2e_lab_script lab_scala_test gnuplot python3

timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" -- --emulate qp_cache=16 > "$TMP/up.log" 2>&1 ||
  e2e_lab_fail "wharf-lab up"

S=$BIN/wharf-scala
timeout 120 "$S" sweep --local /run/wharf-lab/h1/wharfd.sock --remote /run/wharf-lab/h2/wharfd.sock \
  --dim ql=1,2,4,8,16,24,32 --dim qr=1,4,8 --dim size=64,4k --dim opcode=send,write \
  --dim qp_type=rc,ud --dim mrs=1,4 --dim mr_size=64k,1m --dim networks=1 --budget 40 --measure 0.15 \
  -o "$TMP/sweep.json" > "$TMP/sweep.log" 2>&1 || e2e_lab_fail "sweep"
grep -q "against a full factorial of" "$TMP/sweep.log" ||
  e2e_lab_fail "the sweep does not say how many points ran against the full factorial"

"$S" walls "$TMP/sweep.json" -j > "$TMP/walls.log" 2>&1 || e2e_lab_fail "walls"
python3 - "$TMP/walls.log" > "$TMP/walls_check.log" 2>&1 << 'PY' || e2e_lab_fail "$(cat "$TMP/walls_check.log")"
import json, sys
walls = json.load(open(sys.argv[1]))
qp = [w for w in walls if w["dimension"] in ("ql", "qr") and 8 < w["at"] <= 24]
memory = [w for w in walls if w["dimension"] in ("mrs", "mr_size")]
assert qp, "no wall on ql or qr in (8, 24]: %s" % walls
assert not memory, "a wall on a memory dimension: %s" % memory
PY

"$S" fit "$TMP/sweep.json" -j > "$TMP/fit.log" 2>&1 || e2e_lab_fail "fit"
python3 - "$TMP/fit.log" > "$TMP/fit_check.log" 2>&1 << 'PY' || e2e_lab_fail "$(cat "$TMP/fit_check.log")"
import json, sys
rows = json.load(open(sys.argv[1]))
base = [r for r in rows if r["config"] == "baseline"]
assert base, "no fit of the baseline configuration: %s" % rows
r = base[0]
assert r["lat_fitted"] and r["a"] > 0 and r["b"] > 0 and 0 < r["gd"] <= 1, r
for k in "u v m n w a b c gd".split():
    assert k in r, k
PY

"$S" plot "$TMP/sweep.json" -o "$TMP/plots" > "$TMP/plot.log" 2>&1 || e2e_lab_fail "plot"
for p in bw_plane lat_plane scan_ql scan_qr; do
  [[ $(head -c 4 "$TMP/plots/$p.png" | od -An -c | tr -d ' ') == '211PNG' ]] ||
    e2e_lab_fail "$p.png is not a PNG"
  grep -q '<svg' "$TMP/plots/$p.svg" || e2e_lab_fail "$p.svg is not an SVG"
done

echo '{"wharf_scala": 1}' > "$TMP/bad.json"
if "$S" walls "$TMP/bad.json" > "$TMP/bad.log" 2>&1; then
  e2e_lab_fail "a file that is no sweep was taken"
fi
grep -q "missing" "$TMP/bad.log" || e2e_lab_fail "no reason given: $(cat "$TMP/bad.log")"
echo "lab_scala_test: PASS ($(grep -c '^\[' "$TMP/sweep.log") points)"
