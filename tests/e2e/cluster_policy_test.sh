#!/usr/bin/env bash
# Policies between hosts. Two routers of one cluster share this machine's loopback (hosts h1
# on 127.0.0.2, h2 on 127.0.0.3, both following one orchestrator):
#   - priority: a container's priority class (wharfctl container set ... priority P) is the
#     DSCP of its traffic between hosts, class selector CSP: ib_send_bw from h2's container
#     with priority 5 to h1's, and tcpdump on lo sees h2's router send with TOS 0xa0 (CS5);
#   - isolation: a container of another tenant on h2 cannot reach h1's container, although
#     ib_write_bw hands it the LID, QPN and rkey (RETRY_EXC_ERR, status 12), and rping cannot
#     even resolve its address (ADDR_ERROR, -EHOSTUNREACH); the same programs work between
#     the two containers of one network;
#   - LIDs: each container has the lowest LID of its host's range in the cluster file, at the
#     orchestrator and in its application; addresses: the orchestrator gives a new container
#     one of its host's subnet;
#   - a container moved to another host keeps its address: placed on h1 with an address of
#     h1's subnet, then started on h2, it is reached from h1 by that address over rdma_cm
#     (rping) and by its GID (ib_send_bw -x 0), because the routers follow the orchestrator's
#     placements.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/cluster_policy_test.sh
#
# Needs root, tcpdump and perftest (exit 77 if missing). Containers use 198.18.93.0/24 and
# 198.18.94.0/24 on wharf-run's bridge; everything is removed on exit.
set -uo pipefail
BIN=${WHARF_BIN_DIR:?}
[[ $(id -u) == 0 ]] || { echo "needs root"; exit 77; }
for tool in ib_send_bw ib_write_bw rping tcpdump curl; do
  command -v "$tool" > /dev/null || { echo "$tool not installed"; exit 77; }
done
# shellcheck source=tests/e2e/control_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/control_lib.sh"
control_init cluster-policy-test
NAMES=(qa$$ qb$$ qc$$ qm$$)

PORT=$(free_port)
P1=$(free_port)
P2=$(free_port)
export WHARF_ORCHESTRATOR="http://127.0.0.1:$PORT"
"$BIN/wharf-orchestrator" --listen "127.0.0.1:$PORT" --store "sqlite:$WORK/orch.db" --admin-token-file "$WHARF_TOKEN_FILE" > "$WORK/orch.log" 2>&1 &
PIDS+=($!)
wait_for 10 orchestrator_up || fail "orchestrator did not start"
cat > "$WORK/cluster" << EOF
h1 127.0.0.2 198.18.93.0/24 1-1024 $P1
h2 127.0.0.3 198.18.94.0/24 1025-2048 $P2
EOF
"$BIN/wharf-lab" certs "$WORK/tls" h1 h2 # the routers authenticate their links
for h in h1 h2; do
  "$BIN/wharfd" --socket "$WORK/$h.sock" --cluster "$WORK/cluster" --host "$h" \
    --link-ca "$WORK/tls/ca.pem" --link-cert "$WORK/tls/$h.pem" --link-key "$WORK/tls/$h.key" \
    --orchestrator "$WHARF_ORCHESTRATOR" > "$WORK/$h.log" 2>&1 &
  PIDS+=($!)
  wait_for 10 test -S "$WORK/$h.sock" || fail "wharfd $h did not start"
done

ctl tenant add prio > /dev/null || fail "tenant add"
ctl network add n1 tenant prio cidr 198.18.92.0/22 > /dev/null || fail "network add"
ctl container add qa$$ tenant prio network n1 host h1 vip 198.18.93.10 > /dev/null || fail "container add qa"
ctl container add qb$$ tenant prio network n1 host h2 vip 198.18.94.10 > /dev/null || fail "container add qb"
ctl container set qb$$ tenant prio priority 5 > /dev/null || fail "priority"
wait_for 10 grep -q "prio/qb$$: policy" "$WORK/h2.log" || fail "h2's router did not get qb's policy"

# Packets with TOS 0xa0 to h1's router: h2's router carries qb's requests on its connection
# to h1's port (the server's answers travel on h1's connection, in its default class).
timeout 30 tcpdump -i lo -n -v -c 5 "tcp dst port $P1 and (ip[1] & 0xfc) == 0xa0" \
  > "$WORK/tcpdump.log" 2>&1 &
TCPDUMP=$!
PIDS+=("$TCPDUMP")
sleep 1
run_in() {
  local host=$1 name=$2
  shift 2
  "$BIN/wharf-run" --router "$WORK/$host.sock" --tenant prio --network n1 --name "$name" -- "$@"
}
run_in h1 qa$$ timeout 60 ib_send_bw -d wharf0 -n 500 > "$WORK/server.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
listens() { ip netns exec "wharf-qa$$" ss -Hltn "sport = :18515" 2> /dev/null | grep -q .; }
wait_for 20 listens || fail "ib_send_bw server did not listen"
run_in h2 qb$$ timeout 60 ib_send_bw -d wharf0 -n 500 198.18.93.10 > "$WORK/client.log" 2>&1 ||
  fail "ib_send_bw between the hosts"
wait "$SERVER" || fail "ib_send_bw server"
wait "$TCPDUMP" || fail "no packet with DSCP CS5 from h2's router"
grep -q "tos 0xa0" "$WORK/tcpdump.log" || fail "tcpdump shows no tos 0xa0"
echo "priority 5: h2's router sent with DSCP CS5 (TOS 0xa0)"

# LIDs: the orchestrator's, from the ranges the routers registered (the cluster file's), are
# the ones perftest reports.
lids=$(ctl container show tenant prio | awk '{for (i = 1; i < NF; i++) if ($i == "lid") printf "%s ", $(i + 1)}')
[[ $lids == "1 1025 " ]] || fail "qa and qb have LIDs '$lids' at the orchestrator, not 1 and 1025"
grep -q "local address: LID 0x01 " "$WORK/server.log" || fail "qa's LID: $(grep 'local address' "$WORK/server.log")"
grep -q "local address: LID 0x401 " "$WORK/client.log" || fail "qb's LID: $(grep 'local address' "$WORK/client.log")"
[[ $(ctl host show) == *"host h2 address 127.0.0.3 lid_first 1025 lid_last 2048 subnet 198.18.94.0/24 lease "* ]] ||
  fail "h2's entry: $(ctl host show)"
out=$(ctl container add qd$$ tenant prio network n1 host h2) || fail "container add qd"
[[ $out == *" vip 198.18.94.2 host h2 lid 1026 "* ]] || fail "qd on h2 got '$out'"
ctl container del qd$$ tenant prio || fail "container del qd"

# Isolation between hosts: qc, of another tenant, on h2.
ctl tenant add other > /dev/null || fail "tenant add other"
ctl network add n1 tenant other cidr 198.18.92.0/22 > /dev/null || fail "network add other"
ctl container add qc$$ tenant other network n1 host h2 vip 198.18.94.20 > /dev/null || fail "container add qc"
run_other() {
  "$BIN/wharf-run" --router "$WORK/h2.sock" --tenant other --network n1 --name qc$$ -- "$@"
}
run_in h1 qa$$ timeout 60 ib_write_bw -d wharf0 -n 5 > "$WORK/victim.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
wait_for 20 listens || fail "ib_write_bw server did not listen"
if run_other timeout 60 ib_write_bw -d wharf0 -n 5 198.18.93.10 > "$WORK/intruder.log" 2>&1; then
  fail "tenant other on h2 reached tenant prio on h1"
fi
grep -q "Failed status 12" "$WORK/intruder.log" || fail "not IBV_WC_RETRY_EXC_ERR (12)"
kill "$SERVER" 2> /dev/null
wait "$SERVER" 2> /dev/null
echo "isolation: ib_write_bw from another tenant's container on h2: RETRY_EXC_ERR"
run_in h1 qa$$ timeout 60 rping -s -a 198.18.93.10 -C 1 > "$WORK/victim.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
rping_listens() { ctl -r "$WORK/h1.sock" resource show cm_id | grep -q "state LISTEN"; }
wait_for 20 rping_listens || fail "rping server did not listen"
if run_other timeout 60 rping -c -a 198.18.93.10 -C 1 > "$WORK/intruder.log" 2>&1; then
  fail "tenant other on h2 connected to tenant prio on h1 with rdma_cm"
fi
grep -q "RDMA_CM_EVENT_ADDR_ERROR, error -113" "$WORK/intruder.log" || fail "not ADDR_ERROR -113"
echo "isolation: rping from another tenant's container on h2: ADDR_ERROR -EHOSTUNREACH"
run_in h2 qb$$ timeout 60 rping -c -a 198.18.93.10 -C 1 > "$WORK/client.log" 2>&1 ||
  fail "rping within the network"
wait "$SERVER" || fail "rping server"

# A moved container keeps its address: qm is placed on h1 with 198.18.93.30, then runs on h2.
ctl container add qm$$ tenant prio network n1 host h1 vip 198.18.93.30 > /dev/null || fail "container add qm"
run_in h2 qm$$ timeout 60 rping -s -a 198.18.93.30 -C 5 -v > "$WORK/moved.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
moved_listens() { ctl -r "$WORK/h2.sock" resource show cm_id | grep -q "state LISTEN"; }
wait_for 20 moved_listens || fail "rping server on h2 did not listen: $(cat "$WORK/moved.log")"
[[ $(ctl container show tenant prio) == *"container qm$$ tenant prio network n1 vip 198.18.93.30 host h2 lid 1027 "* ]] ||
  fail "qm's record: $(ctl container show tenant prio | tr "\n" ";")"
run_in h1 qa$$ timeout 60 rping -c -a 198.18.93.30 -C 5 -v > "$WORK/mover.log" 2>&1 ||
  fail "rping from h1 to the moved container: $(cat "$WORK/mover.log")"
wait "$SERVER" || fail "rping server on h2"
grep -q "ping data: rdma-ping-4" "$WORK/moved.log" || fail "the moved container got no pings"
echo "moved: rping from h1 reached qm, placed on h1 and moved to h2, at 198.18.93.30"
run_in h2 qm$$ timeout 60 ib_send_bw -d wharf0 -x 0 -n 100 > "$WORK/moved.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
gid_listens() { ip netns exec "wharf-qm$$" ss -Hltn "sport = :18515" 2> /dev/null | grep -q .; }
wait_for 20 gid_listens || fail "ib_send_bw server on h2 did not listen"
run_in h1 qa$$ timeout 60 ib_send_bw -d wharf0 -x 0 -n 100 198.18.93.30 > "$WORK/mover.log" 2>&1 ||
  fail "ib_send_bw by GID from h1 to the moved container: $(cat "$WORK/mover.log")"
wait "$SERVER" || fail "ib_send_bw server on h2"
grep -A1 "remote address: LID 0x403 " "$WORK/mover.log" | grep -q "GID: 00:00:00:00:00:00:00:00:00:00:255:255:198:18:93:30" ||
  fail "ib_send_bw did not address qm by its GID: $(grep -A1 'address' "$WORK/mover.log" | tr "\n" ";")"
echo "moved: ib_send_bw -x 0 from h1 reached qm on h2 by GID ::ffff:198.18.93.30"
echo "PASS"
