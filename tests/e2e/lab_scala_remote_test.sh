#!/usr/bin/env bash
# wharf-scala between two hosts given by address (issue #21): `wharf-scala serve` holds the
# remote half of every point on h2's router and a sweep on h1's drives it over TCP. Every
# point of a small sweep over QPs, sizes, opcodes and QP types runs, the file names the agent
# as the remote device, and the dimensions an agent cannot vary (tenant networks) stay at their
# baselines, or are refused when asked for; a hostile message does not end the agent; with the
# agent gone, a sweep says so. Then on Ethernet routers both ends run as containers of their
# own (--vip), which they must be to reach each other there.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_scala_remote_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail
readonly NAMES=()
e2e_lab_script lab_scala_remote_test python3

timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" > "$TMP/up.log" 2>&1 ||
  e2e_lab_fail "wharf-lab up"
S=$BIN/wharf-scala
PORT=$((20000 + RANDOM % 20000))
AGENT=127.0.0.1:$PORT
# start_agent LOG [serve options...]: `serve` on h2's router at $AGENT; waits until it listens.
start_agent() {
  local log=$1
  shift
  "$S" serve --device /run/wharf-lab/h2/wharfd.sock --listen "$AGENT" "$@" > "$log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    grep -q "serving" "$log" && return
    sleep 0.1
  done
  e2e_lab_fail "the agent did not start: $(cat "$log")"
}
start_agent "$TMP/serve.log"

if "$S" sweep --local /run/wharf-lab/h1/wharfd.sock --remote "$AGENT" --dim networks=10 \
  -o "$TMP/no.json" > "$TMP/no.log" 2>&1; then
  e2e_lab_fail "networks were set with an agent"
fi
grep -q "networks" "$TMP/no.log" || e2e_lab_fail "no reason given: $(cat "$TMP/no.log")"

# Half a character in an unknown op once ended the agent (its error reply could not be written).
python3 - "$PORT" > "$TMP/hostile.log" 2>&1 << 'PY' || e2e_lab_fail "$(cat "$TMP/hostile.log")"
import json, socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
def send(o):
    b = json.dumps(o).encode()
    s.sendall(struct.pack(">I", len(b)) + b)
def receive():
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(s.recv(n, socket.MSG_WAITALL))
send({"op": "hello", "version": 1})
receive()
send({"op": "a" + "\u00e9" * 40})  # byte 32 falls inside a character
assert "error" in receive()
s.close()
PY

timeout 120 "$S" sweep --local /run/wharf-lab/h1/wharfd.sock --remote "$AGENT" \
  --dim ql=1,4,16 --dim qr=1,4 --dim size=64,4k --dim opcode=send,write,read \
  --dim qp_type=rc,ud --dim mrs=1 --dim mr_size=64k --dim cq=shared --dim srq=off \
  --dim inline=off --budget 40 --measure 0.1 -o "$TMP/sweep.json" > "$TMP/sweep.log" 2>&1 ||
  e2e_lab_fail "sweep"
grep -q "networks=1 kept at its baseline" "$TMP/sweep.log" ||
  e2e_lab_fail "no word of the networks kept at their baseline"
if grep -q "failed:" "$TMP/sweep.log"; then
  e2e_lab_fail "points failed: $(grep -m3 'failed:' "$TMP/sweep.log")"
fi
python3 - "$TMP/sweep.json" > "$TMP/check.log" 2>&1 << 'PY' || e2e_lab_fail "$(cat "$TMP/check.log")"
import json, sys
f = json.load(open(sys.argv[1]))
assert "agent 127.0.0.1:" in f["devices"]["remote"], f["devices"]
points = f["points"]
assert len(points) >= 10 and all(p["ok"] for p in points), len(points)
assert all(p["bw_gbps"] > 0 and p["lat_p99_us"] >= p["lat_p50_us"] > 0 for p in points)
kinds = {(p["config"]["opcode"], p["config"]["qp_type"]) for p in points}
assert ("send", "ud") in kinds and ("read", "rc") in kinds, kinds
PY

kill "${PIDS[0]}"
wait "${PIDS[0]}" 2> /dev/null
if "$S" sweep --local /run/wharf-lab/h1/wharfd.sock --remote "$AGENT" -o "$TMP/gone.json" \
  > "$TMP/gone.log" 2>&1; then
  e2e_lab_fail "a sweep ran with the agent gone"
fi
grep -q "cannot connect to the agent" "$TMP/gone.log" ||
  e2e_lab_fail "no reason given: $(cat "$TMP/gone.log")"

# Ethernet routers: an unregistered process's GID is link-local there, so both ends are
# containers (--vip), the agent listening and the sweep connecting from the host's network.
"$LAB" down > /dev/null 2>&1
timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" -- --link-layer eth > "$TMP/up2.log" 2>&1 ||
  e2e_lab_fail "wharf-lab up (Ethernet)"
start_agent "$TMP/serve2.log" --vip 198.18.2.201 --once
timeout 120 "$S" sweep --local /run/wharf-lab/h1/wharfd.sock --remote "$AGENT" \
  --vip 198.18.1.201 --dim ql=1,4 --dim qr=1,4 --dim size=4k --dim opcode=write,send \
  --dim qp_type=rc --dim mrs=1 --dim mr_size=64k --dim cq=shared --dim srq=off --dim inline=off \
  --dim rules=0,10 --budget 30 --measure 0.1 -o "$TMP/eth.json" > "$TMP/eth.log" 2>&1 ||
  e2e_lab_fail "sweep (Ethernet)"
if grep -q "failed:" "$TMP/eth.log"; then
  e2e_lab_fail "points failed (Ethernet): $(grep -m3 'failed:' "$TMP/eth.log")"
fi
grep -q "rules=10" "$TMP/eth.log" || e2e_lab_fail "no point with rules between the containers"
echo "lab_scala_remote_test: PASS ($(grep -c '^\[' "$TMP/sweep.log") + $(grep -c '^\[' "$TMP/eth.log") points)"
