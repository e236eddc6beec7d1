#!/usr/bin/env bash
# A container moved between wharf-lab hosts keeps its address (issue #4). Two lab hosts whose
# routers follow an orchestrator (reached over the lab's underlay, on a veth this test adds
# to the lab's switch); container m is placed on h1 with 198.18.1.50, one of h1's subnet,
# then started on h2: wharf-run routes the address to h2 in the lab, the orchestrator gives
# it a LID of h2's range, and from container c on h1 perftest (its TCP exchange, then RDMA by
# LID and by GID) and rping (rdma_cm) reach it at 198.18.1.50. When m stops its routes go.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_move_test.sh
#
# Needs root, perftest and rdmacm-utils (exit 77 if missing, or if a lab is already up).
set -uo pipefail
BIN=${WHARF_BIN_DIR:?}
LAB=$BIN/wharf-lab
[[ $(id -u) == 0 ]] || { echo "needs root"; exit 77; }
for tool in ib_send_bw rping curl; do
  command -v "$tool" > /dev/null || { echo "$tool not installed"; exit 77; }
done
if ip netns list | grep -q '^wharf-lab-'; then
  echo "a lab is already up; skipped so as not to disturb it"
  exit 77
fi
# shellcheck source=tests/e2e/control_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/control_lib.sh"
control_init lab-move
NAMES=(m$$ c$$)
UPLINK=wlm$$
lab_cleanup() {
  control_cleanup
  ip link del "$UPLINK" 2> /dev/null
  "$LAB" down > /dev/null 2>&1
}
trap lab_cleanup EXIT

PORT=$(free_port)
export WHARF_ORCHESTRATOR="http://198.19.0.200:$PORT"
timeout 60 "$LAB" up --hosts 2 --wharfd "$BIN/wharfd" -- --orchestrator "$WHARF_ORCHESTRATOR" \
  > "$WORK/up.log" 2>&1 || fail "wharf-lab up"
ip link add "$UPLINK" type veth peer name uplink netns wharf-lab-sw || fail "uplink"
ip -n wharf-lab-sw link set uplink master switch up
ip addr add 198.19.0.200/24 dev "$UPLINK"
ip link set "$UPLINK" up
"$BIN/wharf-orchestrator" --listen "198.19.0.200:$PORT" --store "sqlite:$WORK/orch.db" --admin-token-file "$WHARF_TOKEN_FILE" \
  > "$WORK/orch.log" 2>&1 &
PIDS+=($!)
wait_for 10 orchestrator_up || fail "orchestrator did not start"
hosts_up() { [[ $(ctl host show | grep -c "subnet 198.18.[12].0/24") == 2 ]]; }
wait_for 20 hosts_up || fail "the lab's routers did not register: $(ctl host show 2>&1)"

ctl tenant add t > /dev/null || fail "tenant add"
ctl network add n tenant t cidr 198.18.0.0/16 > /dev/null || fail "network add"
ctl container add m$$ tenant t network n host h1 vip 198.18.1.50 > /dev/null || fail "container add m"
run_in() {
  local host=$1 name=$2
  shift 2
  "$BIN/wharf-run" --router "/run/wharf-lab/$host/wharfd.sock" --tenant t --network n \
    --name "$name" -- "$@"
}
listens() { ip netns exec "wharf-m$$" ss -Hltn "sport = :18515" 2> /dev/null | grep -q .; }
for gid in "" "-x 0"; do
  # shellcheck disable=SC2086  # $gid is empty or two words
  run_in h2 m$$ timeout 60 ib_send_bw -d wharf0 -n 100 $gid > "$WORK/server.log" 2>&1 &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_for 20 listens || fail "ib_send_bw server on h2 did not listen"
  # shellcheck disable=SC2086
  run_in h1 c$$ timeout 60 ib_send_bw -d wharf0 -n 100 $gid 198.18.1.50 > "$WORK/client.log" 2>&1 ||
    fail "ib_send_bw ${gid:-by LID} from h1 to m, moved to h2"
  wait "$SERVER" || fail "ib_send_bw server on h2"
  grep -q "remote address: LID 0x401 " "$WORK/client.log" ||
    fail "the client did not reach m with h2's first LID: $(grep -A1 'address' "$WORK/client.log" | tr '\n' ';')"
  echo "moved: ib_send_bw ${gid:-by LID} from h1 reached m at 198.18.1.50 on h2"
done
[[ $(ctl container show tenant t) == *"container m$$ tenant t network n vip 198.18.1.50 host h2 lid 1025 "* ]] ||
  fail "m's record: $(ctl container show tenant t | tr '\n' ';')"
[[ -z $(ip -n wharf-lab-h1 route show 198.18.1.50/32) ]] || fail "m's route on h1 outlived it"

cm_listens() { "$BIN/wharfctl" -r /run/wharf-lab/h2/wharfd.sock resource show cm_id | grep -q "state LISTEN"; }
run_in h2 m$$ timeout 60 rping -s -a 198.18.1.50 -C 3 -v > "$WORK/server.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
wait_for 20 cm_listens || fail "rping server on h2 did not listen"
run_in h1 c$$ timeout 60 rping -c -a 198.18.1.50 -C 3 -v > "$WORK/client.log" 2>&1 ||
  fail "rping from h1 to m, moved to h2"
wait "$SERVER" || fail "rping server on h2"
grep -q "ping data: rdma-ping-2" "$WORK/server.log" || fail "m got no pings"
echo "moved: rping from h1 reached m at 198.18.1.50 on h2"
echo "PASS"
