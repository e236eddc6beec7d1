#!/usr/bin/env bash
# Two tenants whose virtual networks overlap (issue #4: the same CIDR, the same addresses) run
# the same programs on one router at the same time: in each of tenants red and blue, network
# n1 is 198.18.96.0/24 with a server container at .2 and a client container at .3, each
# tenant's containers on a bridge of its own (wharf-run --bridge). rping (rdma_cm by vIP) and
# ib_write_bw (verbs, addresses exchanged over TCP) run in both tenants at once; each tenant's
# server must have served its own client only (`wharfctl statistic show` per container), and a
# third tenant with the same network but no container at .2 cannot resolve .2 by rdma_cm.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/overlap_test.sh
#
# Needs root, perftest, rdmacm-utils and curl (exit 77 if missing); everything is removed on
# exit.
set -uo pipefail
BIN=${WHARF_BIN_DIR:?}
[[ $(id -u) == 0 ]] || { echo "needs root"; exit 77; }
for tool in ib_write_bw rping curl; do
  command -v "$tool" > /dev/null || { echo "$tool not installed"; exit 77; }
done
# shellcheck source=tests/e2e/control_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/control_lib.sh"
control_init overlap-test
TENANTS=(red blue)
SERVER=198.18.96.2
CLIENT=198.18.96.3

PORT=$(free_port)
export WHARF_ORCHESTRATOR="http://127.0.0.1:$PORT"
"$BIN/wharf-orchestrator" --listen "127.0.0.1:$PORT" --store "sqlite:$WORK/orch.db" --admin-token-file "$WHARF_TOKEN_FILE" > "$WORK/orch.log" 2>&1 &
PIDS+=($!)
wait_for 10 orchestrator_up || fail "orchestrator did not start"
SOCK=$WORK/wharfd.sock
"$BIN/wharfd" --socket "$SOCK" --host o1 --orchestrator "$WHARF_ORCHESTRATOR" > "$WORK/wharfd.log" 2>&1 &
PIDS+=($!)
wait_for 10 test -S "$SOCK" || fail "wharfd did not start"
for t in "${TENANTS[@]}"; do
  ctl tenant add "$t" > /dev/null || fail "tenant add $t"
  ctl network add n1 tenant "$t" cidr 198.18.96.0/24 > /dev/null || fail "network add $t"
done

# in_tenant TENANT NAME VIP CMD...: runs CMD as container NAME of TENANT at VIP, on the
# tenant's bridge. Run it in the background: it becomes wharf-run (so a signal to its pid
# reaches wharf-run, which passes it on to CMD and removes the container).
in_tenant() {
  local tenant=$1 name=$2 vip=$3
  shift 3
  exec "$BIN/wharf-run" --router "$SOCK" --tenant "$tenant" --network n1 --name "$name" --vip "$vip" \
    --bridge "wb${tenant:0:1}$$" --bridge-ip 198.18.96.1 --prefix 24 -- "$@"
}
server() { echo "${1:0:1}s$$"; }  # the container names of a tenant's server and client
client() { echo "${1:0:1}c$$"; }
for t in "${TENANTS[@]}"; do NAMES+=("$(server "$t")" "$(client "$t")"); done

# start_servers TAG CHECK CMD...: the server CMD in both tenants (logs TAG-TENANT-server.log),
# then waits until `CHECK CONTAINER` succeeds for each.
SERVER_PIDS=()
start_servers() {
  local tag=$1 check=$2 t
  shift 2
  SERVER_PIDS=()
  for t in "${TENANTS[@]}"; do
    in_tenant "$t" "$(server "$t")" $SERVER "$@" > "$WORK/$tag-$t-server.log" 2>&1 &
    SERVER_PIDS+=($!)
    PIDS+=($!)
  done
  for t in "${TENANTS[@]}"; do
    wait_for 20 "$check" "$(server "$t")" || fail "$tag server of $t did not listen"
  done
}
# run_clients TAG CMD...: the client CMD in both tenants at once; fails unless both exit 0.
run_clients() {
  local tag=$1 t i pids=()
  shift
  for t in "${TENANTS[@]}"; do
    in_tenant "$t" "$(client "$t")" $CLIENT timeout 60 "$@" > "$WORK/$tag-$t-client.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" ||
      fail "$tag client of ${TENANTS[$i]} failed: $(tail -5 "$WORK/$tag-${TENANTS[$i]}-client.log")"
  done
}
# wait_servers TAG: both servers exit 0 within 15 s.
wait_servers() {
  local i
  for i in "${!SERVER_PIDS[@]}"; do
    wait_for 15 bash -c "! kill -0 ${SERVER_PIDS[$i]} 2> /dev/null" ||
      fail "$1 server of ${TENANTS[$i]} did not finish"
    wait "${SERVER_PIDS[$i]}" || fail "$1 server of ${TENANTS[$i]} failed"
  done
}
cm_listening() {
  ctl -r "$SOCK" resource show cm_id container "$1" 2> /dev/null | grep -q "state LISTEN"
}
tcp_listening() { ip netns exec "wharf-$1" ss -Hltn "sport = :18515" 2> /dev/null | grep -q .; }
rx_msgs() {  # rx_msgs TENANT: what the tenant's server container has received
  local stats
  stats=$(ctl -r "$SOCK" statistic show container "$(server "$1")" tenant "$1")
  [[ $stats =~ rx_msgs\ ([0-9]+) ]] || fail "statistic of $1: '$stats'"
  echo "${BASH_REMATCH[1]}"
}

# rping; the servers stay a while after it, for their statistics.
start_servers rping cm_listening bash -c "rping -s -a $SERVER -v -C 100 && exec sleep 30"
run_clients rping rping -c -a $SERVER -v -C 100
for t in "${TENANTS[@]}"; do
  grep -q "ping data: rdma-ping-99" "$WORK/rping-$t-client.log" ||
    fail "rping in $t: $(tail -3 "$WORK/rping-$t-client.log")"
done
# Each server answered its own client: had a connection crossed tenants, one server would
# have received twice what the other did.
red=$(rx_msgs red)
blue=$(rx_msgs blue)
((red >= 100 && red == blue)) || fail "rping servers received $red (red) and $blue (blue) messages"
# A third tenant with the same network but nobody at .2 cannot reach either tenant's .2:
# ADDR_ERROR, -EHOSTUNREACH, although two containers on this router hold that address.
ctl tenant add green > /dev/null || fail "tenant add green"
ctl network add n1 tenant green cidr 198.18.96.0/24 > /dev/null || fail "network add green"
NAMES+=("gc$$")
if (in_tenant green "gc$$" $CLIENT timeout 30 rping -c -a $SERVER -C 1) > "$WORK/green.log" 2>&1; then
  fail "green reached 198.18.96.2 with rdma_cm: $(cat "$WORK/green.log")"
fi
grep -q "RDMA_CM_EVENT_ADDR_ERROR, error -113" "$WORK/green.log" ||
  fail "green: not ADDR_ERROR -EHOSTUNREACH: $(cat "$WORK/green.log")"
kill "${SERVER_PIDS[@]}" 2> /dev/null
wait "${SERVER_PIDS[@]}" 2> /dev/null

start_servers bw tcp_listening ib_write_bw -d wharf0 -n 200
run_clients bw ib_write_bw -d wharf0 -n 200 $SERVER
for t in "${TENANTS[@]}"; do
  grep -qE "^ 65536 +200 " "$WORK/bw-$t-client.log" ||
    fail "ib_write_bw in $t: $(tail -5 "$WORK/bw-$t-client.log")"
done
wait_servers bw
echo "PASS: tenants red and blue ran rping and ib_write_bw at 198.18.96.2 and .3 at once"
