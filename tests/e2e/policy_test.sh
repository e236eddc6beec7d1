#!/usr/bin/env bash
# Policies set with wharfctl reach a running router (wharfd --orchestrator) and the
# applications of its containers (wharf-run --tenant), without restarting either:
#   - quota qp 4: the 5th ibv_create_qp fails with EDQUOT, and a destroyed QP can be made again;
#     a quota changed while the application runs applies to its next verb; mr_bytes caps
#     ibv_reg_mr the same way;
#   - ratelimit rate 1gbit: ib_write_bw from the limited container reports about 1 Gbit/s
#     (the precise figures, and the time to take effect, are bench/policy.sh's);
#   - isolation: ib_write_bw from another tenant, or another network of the same tenant, to a
#     server whose LID, QPN and rkey it was told fails (retries exhausted), as if nobody were
#     there; rping (rdma_cm) from there gets ADDR_ERROR for the server's address; within one
#     network both work;
#   - a container's applications see the LID the orchestrator gave it, one of the range the
#     router registered its host with;
#   - `wharfctl resource show` lists a container's objects with their process and container,
#     `wharfctl statistic show` what they moved;
#   - a router restarted later, and an orchestrator killed and restarted, keep the policies.
# Needs root, WHARF_BIN_DIR (wharfd, wharf-run, wharf-orchestrator, wharfctl),
# WHARF_QUOTA_PROBE, perftest and rdmacm-utils (exit 77 if missing). Containers use
# 198.18.77.0/24 on wharf-run's bridge; everything is removed on exit.
set -uo pipefail
BIN=${WHARF_BIN_DIR:?}
PROBE=${WHARF_QUOTA_PROBE:?}
[[ $(id -u) == 0 ]] || { echo "needs root"; exit 77; }
command -v ib_write_bw > /dev/null || { echo "perftest not installed"; exit 77; }
command -v rping > /dev/null || { echo "rdmacm-utils not installed"; exit 77; }
# shellcheck source=tests/e2e/control_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/control_lib.sh"
control_init policy-test
PORT=$(free_port)
export WHARF_ORCHESTRATOR="http://127.0.0.1:$PORT"
SOCK=$WORK/wharfd.sock
start_orchestrator() {
  "$BIN/wharf-orchestrator" --listen "127.0.0.1:$PORT" --store "sqlite:$WORK/orch.db" --admin-token-file "$WHARF_TOKEN_FILE" >> "$WORK/orch.log" 2>&1 &
  ORCH=$!
  PIDS+=("$ORCH")
  wait_for 10 orchestrator_up || fail "orchestrator did not start"
}
start_router() {
  "$BIN/wharfd" --socket "$SOCK" --host p1 --orchestrator "$WHARF_ORCHESTRATOR" >> "$WORK/wharfd.log" 2>&1 &
  ROUTER=$!
  PIDS+=("$ROUTER")
  # Ready when it accepts: a socket file left by the previous router accepts nothing.
  wait_for 10 accepts "$SOCK" || fail "wharfd did not start"
}
# accepts PATH: a connection to the unix socket PATH is accepted.
accepts() {
  python3 -c "import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])" "$1" 2> /dev/null
}
# stop_container NAME: ends what runs in container NAME (killing the background `in_container`
# subshell would leave wharf-run and its command running) and waits until its wharf-run has
# removed it.
stop_container() {
  ip netns pids "wharf-$1" 2> /dev/null | xargs -r kill 2> /dev/null
  wait_for 10 test ! -e "/run/netns/wharf-$1" || fail "container $1 did not stop"
}
# tcp_listens NAME PORT: a TCP socket listens on PORT in container NAME.
tcp_listens() { ip netns exec "wharf-$1" ss -Hltn "sport = :$2" 2> /dev/null | grep -q .; }
# in_container NAME CMD...: runs CMD as container NAME of tenant red.
in_container() {
  local name=$1
  shift
  NAMES+=("$name")
  "$BIN/wharf-run" --router "$SOCK" --tenant red --network n1 --name "$name" -- "$@"
}
# router_says TEXT: the router logged TEXT.
router_says() { grep -q -- "$1" "$WORK/wharfd.log"; }

start_orchestrator
start_router
ctl tenant add red || fail "tenant add"
ctl network add n1 tenant red cidr 198.18.77.0/24 || fail "network add"

# A quota set before the container starts.
ctl container add pq$$ tenant red network n1 host p1 > /dev/null || fail "container add"
ctl quota set pq$$ tenant red qp 4 mr_bytes 1mb > /dev/null || fail "quota set"
wait_for 10 router_says "red/pq$$: policy qp 4 mr_bytes 1048576" || fail "the router did not get the quota"
out=$(in_container pq$$ bash -c "$PROBE qp 4; $PROBE mr 262144" 2>&1) || fail "probe: $out"
[[ $out == *"qps 4 errno EDQUOT"* ]] || fail "qp quota 4: $out"
[[ $out == *"recreate ok"* ]] || fail "a destroyed QP was not given back to the quota: $out"
[[ $out == *"mrs 4 errno EDQUOT"* ]] || fail "mr_bytes quota 1 MiB, 256 KiB each: $out"

# The LID is the orchestrator's: the lowest of the router's range (wharfd's default, 1-49151)
# that no other container has.
lid=$(ctl -j container show tenant red | python3 -c "import json, sys
print(next(c['lid'] for c in json.load(sys.stdin) if c['name'] == 'pq$$'))")
[[ $lid == 1 ]] || fail "the orchestrator gave pq$$ LID '$lid', not 1"
seen=$(in_container pq$$ ibv_devinfo -v 2>&1 | awk '/port_lid:/ {print $2; exit}')
[[ $seen == "$lid" ]] || fail "pq$$'s applications see LID '$seen', the orchestrator says $lid"

# A quota changed while the application runs applies to its next verb.
in_container pq$$ bash -c "until [[ -e $WORK/go ]]; do sleep 0.05; done; $PROBE qp 8" > "$WORK/live.log" 2>&1 &
PIDS+=($!)
LIVE=$!
wait_for 10 router_says "red/pq$$ registered.*" || fail "container did not register"
ctl quota set pq$$ tenant red qp 6 > /dev/null || fail "quota set live"
wait_for 10 router_says "red/pq$$: policy qp 6" || fail "the router did not get the new quota"
touch "$WORK/go"
wait "$LIVE" || fail "live probe: $(cat "$WORK/live.log")"
grep -q "qps 6 errno EDQUOT" "$WORK/live.log" || fail "live quota 6: $(cat "$WORK/live.log")"

# A rate limit on the sending container.
ctl container add pa$$ tenant red network n1 host p1 > /dev/null || fail "container add"
ctl container add pb$$ tenant red network n1 host p1 > /dev/null || fail "container add"
SERVER=$(ctl -j container show tenant red | python3 -c "import json,sys; print([c['vip'] for c in json.load(sys.stdin) if c['name']=='pa$$'][0])")
ctl ratelimit set pb$$ tenant red rate 1gbit > /dev/null || fail "ratelimit set"
wait_for 10 router_says "red/pb$$: policy rate 1000000000" || fail "the router did not get the rate"
in_container pa$$ ib_write_bw -d wharf0 -D 3 --report_gbits > "$WORK/server.log" 2>&1 &
server=$!
PIDS+=("$server")
wait_for 20 tcp_listens pa$$ 18515 || fail "ib_write_bw in pa did not listen: $(cat "$WORK/server.log")"
in_container pb$$ ib_write_bw -d wharf0 -D 3 --report_gbits "$SERVER" > "$WORK/client.log" 2>&1 ||
  fail "ib_write_bw client"
wait "$server" || fail "ib_write_bw server: $(cat "$WORK/server.log")"
gbits=$(awk '$1 == 65536 { print $4 }' "$WORK/client.log")
[[ -n $gbits ]] || fail "no result from ib_write_bw"
# Loose bounds: a limit must hold (at most +5 %); noise may only make it slower.
python3 -c "import sys; g = float('$gbits'); sys.exit(0 if 0.5 <= g <= 1.05 else 1)" ||
  fail "1 Gbit/s limit: ib_write_bw reported $gbits Gbit/s"
echo "rate limit 1gbit: ib_write_bw $gbits Gbit/s"

# Isolation: a container of another tenant, or of another network of the same tenant, cannot
# reach pa's QP, although ib_write_bw hands it the LID, QPN and rkey (over TCP).
ctl tenant add blue || fail "tenant add blue"
ctl network add n1 tenant blue cidr 198.18.79.0/24 || fail "network add blue"
ctl network add n2 tenant red cidr 198.18.80.0/24 || fail "network add red n2"
for intruder in "blue n1 pi$$" "red n2 pj$$"; do
  read -r tenant network name <<< "$intruder"
  NAMES+=("$name")
  in_container pa$$ timeout 30 ib_write_bw -d wharf0 -n 5 > "$WORK/victim.log" 2>&1 &
  victim=$!
  PIDS+=("$victim")
  wait_for 20 tcp_listens pa$$ 18515 || fail "ib_write_bw in pa did not listen: $(cat "$WORK/victim.log")"
  if timeout 30 "$BIN/wharf-run" --router "$SOCK" --tenant "$tenant" --network "$network" --name "$name" \
    -- ib_write_bw -d wharf0 -n 5 "$SERVER" > "$WORK/intruder.log" 2>&1; then
    fail "$tenant/$network reached red/n1: $(cat "$WORK/intruder.log")"
  fi
  grep -q "Failed status 12" "$WORK/intruder.log" || fail "$tenant/$network: not IBV_WC_RETRY_EXC_ERR (12): $(cat "$WORK/intruder.log")"
  stop_container pa$$
  wait "$victim" 2> /dev/null
done
# rdma_cm from there cannot even resolve pa's address: ADDR_ERROR, -EHOSTUNREACH.
in_container pa$$ timeout 30 rping -s -a "$SERVER" -C 1 > "$WORK/victim.log" 2>&1 &
victim=$!
PIDS+=("$victim")
listens() { ctl -r "$SOCK" resource show cm_id container pa$$ | grep -q "state LISTEN"; }
wait_for 10 listens || fail "rping did not listen: $(cat "$WORK/victim.log")"
for intruder in "blue n1 pk$$" "red n2 pl$$"; do
  read -r tenant network name <<< "$intruder"
  NAMES+=("$name")
  if timeout 30 "$BIN/wharf-run" --router "$SOCK" --tenant "$tenant" --network "$network" --name "$name" \
    -- rping -c -a "$SERVER" -C 1 > "$WORK/intruder.log" 2>&1; then
    fail "$tenant/$network connected to red/n1 with rdma_cm: $(cat "$WORK/intruder.log")"
  fi
  grep -q "RDMA_CM_EVENT_ADDR_ERROR, error -113" "$WORK/intruder.log" ||
    fail "$tenant/$network: not ADDR_ERROR -EHOSTUNREACH: $(cat "$WORK/intruder.log")"
done
# The same programs within one network work.
in_container pb$$ timeout 30 rping -c -a "$SERVER" -C 1 > "$WORK/client.log" 2>&1 ||
  fail "rping within red/n1: $(cat "$WORK/client.log")"
wait "$victim" || fail "rping server within red/n1: $(cat "$WORK/victim.log")"
in_container pa$$ timeout 30 ib_write_bw -d wharf0 -n 5 > "$WORK/server.log" 2>&1 &
server=$!
PIDS+=("$server")
wait_for 20 tcp_listens pa$$ 18515 || fail "ib_write_bw in pa did not listen: $(cat "$WORK/server.log")"
in_container pb$$ timeout 30 ib_write_bw -d wharf0 -n 5 "$SERVER" > "$WORK/client.log" 2>&1 ||
  fail "within red/n1: $(cat "$WORK/client.log")"
wait "$server" || fail "ib_write_bw server within red/n1: $(cat "$WORK/server.log")"

# The router lists what the container holds, in `rdma res show`'s manner.
in_container pa$$ timeout 30 ibv_rc_pingpong -d wharf0 -p 19877 > "$WORK/pingpong.log" 2>&1 &
pingpong=$!
PIDS+=("$pingpong")
holds_qp() { ctl -r "$SOCK" resource show qp container pa$$ | grep -q "type RC state INIT"; }
wait_for 10 holds_qp || fail "resource show qp: $(ctl -r "$SOCK" resource show qp)"
out=$(ctl -r "$SOCK" resource show qp container pa$$)
[[ $out == "link wharf0/1 lqpn "*" comm ibv_rc_pingpong container red/pa$$ vip $SERVER" ]] ||
  fail "resource show qp: '$out'"
out=$(ctl -r "$SOCK" resource show container pa$$)
[[ $out == "wharf0: pd 1 cq 1 qp 1 mr 1 cm_id 0" ]] || fail "resource show: '$out'"
# ... and what a container moved, in `rdma statistic show`'s manner, its finished QPs
# included: 50 pingpong rounds of 4096 bytes each way between ps and pb (through the router,
# as pb is rate-limited; tests/e2e/CMakeLists.txt's e2e.preload.statistic.direct checks the
# direct path, where the libraries count).
ctl -r "$SOCK" statistic show container pa$$ | grep -q "tx_msgs 0 tx_bytes 0 rx_msgs 0" ||
  fail "statistic before traffic: $(ctl -r "$SOCK" statistic show)"
stop_container pa$$
wait "$pingpong" 2> /dev/null
NAMES+=("ps$$")
in_container ps$$ bash -c "ibv_rc_pingpong -d wharf0 -p 19878 -n 50; sleep 10" > "$WORK/pong.log" 2>&1 &
pingpong=$!
PIDS+=("$pingpong")
pingpong_listens() { ip netns exec "wharf-ps$$" ss -Hltn "sport = :19878" 2> /dev/null | grep -q .; }
wait_for 20 pingpong_listens || fail "ibv_rc_pingpong in ps did not listen: $(cat "$WORK/pong.log")"
PONG=$(ctl -j container show tenant red | python3 -c "import json,sys; print([c['vip'] for c in json.load(sys.stdin) if c['name']=='ps$$'][0])")
in_container pb$$ ibv_rc_pingpong -d wharf0 -p 19878 -n 50 "$PONG" > "$WORK/ping.log" 2>&1 ||
  fail "pingpong within red/n1: $(cat "$WORK/ping.log")"
counted() { ctl -r "$SOCK" statistic show container ps$$ | grep -q "tx_msgs 50 tx_bytes 204800 rx_msgs 50 rx_bytes 204800 errors 0 container red/ps$$"; }
wait_for 5 counted || fail "statistic show: '$(ctl -r "$SOCK" statistic show container ps$$)'"

# A router started after the policies were set gets them from its first listing.
kill "$ROUTER"
wait "$ROUTER" 2> /dev/null
: > "$WORK/wharfd.log"
start_router
wait_for 15 router_says "red/pq$$: policy qp 6" || fail "the restarted router did not list the policies"
out=$(in_container pq$$ "$PROBE" qp 8 2>&1) || fail "probe after router restart: $out"
[[ $out == *"qps 6 errno EDQUOT"* ]] || fail "quota after router restart: $out"

# A killed and restarted orchestrator: the router keeps what it had and follows new changes.
kill -9 "$ORCH"
wait "$ORCH" 2> /dev/null
start_orchestrator
ctl quota set pq$$ tenant red qp 2 > /dev/null || fail "quota set after orchestrator restart"
wait_for 15 router_says "red/pq$$: policy qp 2" || fail "the router missed a change after the orchestrator restarted"
out=$(in_container pq$$ "$PROBE" qp 8 2>&1) || fail "probe after orchestrator restart: $out"
[[ $out == *"qps 2 errno EDQUOT"* ]] || fail "quota after orchestrator restart: $out"
echo PASS
