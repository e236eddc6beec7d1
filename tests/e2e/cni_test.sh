#!/usr/bin/env bash
# wharf-cni driven exactly as a runtime drives a conflist (cni_runtime.py, libcni's rules):
# Debian's bridge + host-local, then wharf-cni, for two pods (network namespaces) with the
# CNI_ARGS containerd sends. Checks: VERSION lists 1.0.0; ADD's result carries the pod IP and
# the pod is registered in the tenant its K8S_POD_NAMESPACE names;
# ibv_devinfo in a pod shows it in GID[0]; rping -V between the pods by pod IP; CHECK; DEL
# twice. Refusals, each a CNI error with its code and leaving nothing registered: no
# prevResult (7), an unknown router (100), an address outside the network's subnet (7), a
# second ADD for a pod (101), another sandbox of the same pod name (101). DEL succeeds
# once the router is gone. Bounded: every plugin and program runs under a timeout.
#
#   cni_test.sh router         wharf-cni registers pods with the router alone ("subnet" bounds
#                              their addresses)
#   cni_test.sh orchestrator   through wharf-orchestrator: ADD places the pod (its record
#                              shows the pod IP and the router's host), the network's CIDR
#                              bounds addresses, DEL deletes the record, and an orchestrator
#                              that cannot be reached is error 104
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
MODE=${1:-router}
[[ $MODE == router || $MODE == orchestrator ]] || { echo "usage: $0 router|orchestrator" >&2; exit 2; }
e2e_init
CNI_PLUGINS=/usr/lib/cni
[[ -x $CNI_PLUGINS/bridge && -x $CNI_PLUGINS/host-local ]] ||
  e2e_fail "no $CNI_PLUGINS/bridge: apt-get install containernetworking-plugins (scripts/install-deps.sh)"
e2e_require_command rping
e2e_require_command ibv_devinfo
WCNI=$E2E_BIN/wharf-cni
[[ -x $WCNI ]] || e2e_fail "$WCNI is missing (build target wharf-cni)"
LIB=$(cd "$E2E_BIN/../lib" && pwd)
RUNTIME=$(dirname "$0")/cni_runtime.py

BRIDGE=wcni$$
SUBNET=198.18.7.0/24
PODS=(cnia$$ cnib$$ cnic$$)
cni_cleanup() {
  local rc=$?
  local p
  for p in "${PODS[@]}"; do ip netns del "$p" 2>/dev/null; done
  ip link del "$BRIDGE" 2>/dev/null
  (exit "$rc")
  e2e_cleanup
}
trap cni_cleanup EXIT

if [[ $MODE == orchestrator ]]; then
  TOKEN=$E2E_TMP/admin.token
  ORCH=http://127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$E2E_BIN/wharf-orchestrator" --listen "${ORCH#http://}" --store "sqlite:$E2E_TMP/orch.db" \
    --admin-token-file "$TOKEN" >"$E2E_TMP/orch.log" 2>&1 &
  E2E_PIDS+=($!)
  E2E_LOGS+=("orchestrator:$E2E_TMP/orch.log")
  ctl() { timeout 20 "$E2E_BIN/wharfctl" -o "$ORCH" -t "$TOKEN" "$@"; }
  for ((i = 0; i < 100; i++)); do [[ -s $TOKEN ]] && ctl tenant show >/dev/null 2>&1 && break; sleep 0.1; done
  ctl tenant add t1 >/dev/null || e2e_fail "the orchestrator did not take tenant t1"
  ctl network add n1 tenant t1 cidr "$SUBNET" >/dev/null || e2e_fail "the orchestrator did not take network n1"
  E2E_WHARFD_ARGS="--host c1 --orchestrator $ORCH --token-file $TOKEN"
  PLACE=", \"orchestrator\": \"$ORCH\", \"tokenFile\": \"$TOKEN\""
else
  PLACE=", \"subnet\": \"$SUBNET\""
fi
e2e_start_router

# The chain names no tenant: wharf-cni takes the pod's namespace (K8S_POD_NAMESPACE, t1).
CONFLIST=$E2E_TMP/wpods.conflist
cat >"$CONFLIST" <<JSON
{"cniVersion": "1.0.0", "name": "wpods", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true,
   "ipam": {"type": "host-local", "subnet": "$SUBNET", "dataDir": "$E2E_TMP/ipam"}},
  {"type": "wharf-cni", "router": "$E2E_SOCK", "network": "n1"$PLACE}]}
JSON
pod_args() { echo "IgnoreUnknown=1;K8S_POD_NAMESPACE=t1;K8S_POD_NAME=$1;K8S_POD_INFRA_CONTAINER_ID=sb-$1"; }
# chain CMD POD NAME: the conflist for sandbox sb-NAME in network namespace POD.
chain() {
  timeout 120 python3 "$RUNTIME" "$1" "$CONFLIST" "sb-$3" "/run/netns/$2" --path "$CNI_PLUGINS:$E2E_BIN" \
    --args "$(pod_args "$3")" --cache "$E2E_TMP/cache"
}
# wcni CMD SANDBOX POD NAME CONF: wharf-cni alone.
wcni() {
  echo "$5" | CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/$3 CNI_IFNAME=eth0 \
    CNI_ARGS=$(pod_args "$4") CNI_PATH=$E2E_BIN timeout 30 "$WCNI" 2>>"$E2E_TMP/wharf-cni.err"
}
E2E_LOGS+=("wharf-cni stderr:$E2E_TMP/wharf-cni.err")
# refused LABEL CODE TEXT OUTPUT RC: OUTPUT is a CNI error of CODE whose msg mentions TEXT.
refused() {
  [[ $5 != 0 ]] || e2e_fail "$1: wharf-cni succeeded: $4"
  python3 -c 'import json,sys; e=json.loads(sys.argv[1]); sys.exit(not (e["code"]==int(sys.argv[2]) and sys.argv[3] in e["msg"]))' \
    "$4" "$2" "$3" 2>/dev/null || e2e_fail "$1: expected CNI error $2 mentioning '$3', got: $4"
  e2e_log "$1: refused as expected: $4"
}
wharf_conf() {  # ROUTER SUBNET PREV (with an orchestrator, its network's CIDR bounds instead)
  local place=',"subnet":"'"$2"'"'
  [[ $MODE == orchestrator ]] && place=',"orchestrator":"'"$ORCH"'","tokenFile":"'"$TOKEN"'"'
  echo '{"cniVersion":"1.0.0","name":"wpods","type":"wharf-cni","router":"'"$1"'","tenant":"t1","network":"n1"'"$place"',"prevResult":'"$3"'}'
}
# placed NAME IP: the orchestrator's record of pod NAME has address IP on host c1 (IP "":
# there is no record). Always true without an orchestrator.
placed() {
  [[ $MODE == orchestrator ]] || return 0
  local rows
  rows=$(ctl -j container show tenant t1) || e2e_fail "wharfctl container show failed"
  python3 - "$rows" "$1" "$2" <<'PY'
import json, sys
rows = json.loads(sys.argv[1])
rows = rows.get("containers", rows) if isinstance(rows, dict) else rows
mine = [r for r in rows if r.get("name") == sys.argv[2]]
if not sys.argv[3]:
    sys.exit(1 if mine else 0)
sys.exit(0 if any(r.get("vip") == sys.argv[3] and r.get("host") == "c1" for r in mine) else 1)
PY
}

echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION "$WCNI" | grep -q '"1.0.0"' ||
  e2e_fail "VERSION does not list 1.0.0"

declare -A IP RESULT
for i in 0 1; do
  pod=${PODS[$i]} name=pod-$i
  ip netns add "$pod" || e2e_fail "ip netns add $pod"
  RESULT[$pod]=$(chain ADD "$pod" "$name") || e2e_fail "ADD of $name failed: ${RESULT[$pod]}"
  IP[$pod]=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ips"][0]["address"].split("/")[0])' "${RESULT[$pod]}") ||
    e2e_fail "ADD result of $name has no address: ${RESULT[$pod]}"
  e2e_log "$name: pod IP ${IP[$pod]}"
  placed "$name" "${IP[$pod]}" || e2e_fail "the orchestrator has no record of $name at ${IP[$pod]} on c1"
  grep -q "container t1/$name registered" "$E2E_TMP/wharfd.log" ||
    e2e_fail "the router did not register $name in tenant t1 (its K8S_POD_NAMESPACE)"
done
a=${PODS[0]} b=${PODS[1]} c=${PODS[2]}

inpod() {
  local pod=$1 limit=$2
  shift 2
  ip netns exec "$pod" env WHARF_ROUTER="$E2E_SOCK" LD_PRELOAD="$LIB/libibverbs.so.1:$LIB/librdmacm.so.1" \
    timeout "$limit" "$@"
}
read -r -a octets <<<"${IP[$a]//./ }"
gid_hex=$(printf '%02x%02x:%02x%02x' "${octets[@]}")
inpod "$a" 20 ibv_devinfo -v >"$E2E_TMP/devinfo.out" 2>&1
E2E_LOGS+=("ibv_devinfo:$E2E_TMP/devinfo.out")
grep -q "GID\[ *0\]:.*ffff:$gid_hex" "$E2E_TMP/devinfo.out" ||
  e2e_fail "ibv_devinfo in pod-0 does not show ${IP[$a]} in GID[0]"

inpod "$a" 40 rping -s -a "${IP[$a]}" -C 20 -V >"$E2E_TMP/rping-s.out" 2>&1 &
server=$!
E2E_PIDS+=("$server")
E2E_LOGS+=("rping server:$E2E_TMP/rping-s.out" "rping client:$E2E_TMP/rping-c.out")
sleep 1
inpod "$b" 30 rping -c -a "${IP[$a]}" -C 20 -V >"$E2E_TMP/rping-c.out" 2>&1 ||
  e2e_fail "rping from pod-1 to pod-0 (${IP[$a]}) failed"
wait "$server" || e2e_fail "rping server in pod-0 failed"

for i in 0 1; do
  chain CHECK "${PODS[$i]}" "pod-$i" >/dev/null || e2e_fail "CHECK of pod-$i failed"
done
if [[ $MODE == orchestrator ]]; then
  # CHECK asks the orchestrator too: a pod whose record was deleted fails it.
  ctl container del pod-1 tenant t1 >/dev/null || e2e_fail "wharfctl container del pod-1"
  out=$(wcni CHECK sb-pod-1 "$b" pod-1 "$(wharf_conf "$E2E_SOCK" "" "${RESULT[$b]}")")
  refused "CHECK without a record" 102 "pod-1" "$out" $?
fi

# Refusals. Pod c borrows pod-0's result where a prevResult is needed.
ip netns add "$c" || e2e_fail "ip netns add $c"
out=$(wcni ADD sb-c "$c" pod-c '{"cniVersion":"1.0.0","name":"wpods","type":"wharf-cni","router":"'"$E2E_SOCK"'"}')
refused "no prevResult" 7 prevResult "$out" $?
out=$(wcni ADD sb-c "$c" pod-c "$(wharf_conf "$E2E_TMP/none.sock" "$SUBNET" "${RESULT[$a]}")")
refused "unknown router" 100 "cannot reach the router" "$out" $?
if [[ $MODE == orchestrator ]]; then
  out=$(wcni ADD sb-c "$c" pod-c "$(wharf_conf "$E2E_SOCK" "" '{"ips":[{"address":"198.18.50.5/24"}]}')")
  refused "address outside the network" 101 "orchestrator refused" "$out" $?
  placed pod-c "" || e2e_fail "a refused pod left a record at the orchestrator"
  out=$(wcni ADD sb-c "$c" pod-c "$(wharf_conf "$E2E_SOCK" "" "${RESULT[$a]}" | sed "s|$ORCH|http://127.0.0.1:1|")")
  refused "unreachable orchestrator" 104 "cannot reach the orchestrator" "$out" $?
else
  out=$(wcni ADD sb-c "$c" pod-c "$(wharf_conf "$E2E_SOCK" 198.18.9.0/24 "${RESULT[$a]}")")
  refused "address outside the network" 7 outside "$out" $?
fi
out=$(wcni ADD sb-pod-0 "$a" pod-0 "$(wharf_conf "$E2E_SOCK" "$SUBNET" "${RESULT[$a]}")")
refused "second ADD" 101 "already registered" "$out" $?
out=$(wcni ADD sb-c "$c" pod-0 "$(wharf_conf "$E2E_SOCK" "$SUBNET" '{"ips":[{"address":"198.18.7.200/24"}]}')")
refused "same pod name" 101 pod-0 "$out" $?
# A runtime runs DEL after a failed ADD: it must not take pod-0's registration or record.
wcni DEL sb-c "$c" pod-0 "$(wharf_conf "$E2E_SOCK" "$SUBNET" '{}')" >/dev/null ||
  e2e_fail "DEL after a refused ADD failed"
placed pod-0 "${IP[$a]}" || e2e_fail "refused ADDs changed pod-0's record at the orchestrator"
# A pod's processes reach the router's socket, often as root: they may not register
# anything, their own namespace as another container included, nor release another pod.
# (The router refuses; the orchestrator on the host's loopback is not theirs to ask.)
out=$(ip netns exec "$a" env CNI_COMMAND=ADD CNI_CONTAINERID=sb-evil CNI_NETNS="/run/netns/$a" \
  CNI_IFNAME=eth0 CNI_ARGS="K8S_POD_NAMESPACE=t2;K8S_POD_NAME=evil" timeout 30 "$WCNI" \
  <<<'{"cniVersion":"1.0.0","name":"wpods","type":"wharf-cni","router":"'"$E2E_SOCK"'","network":"n1","prevResult":{"ips":[{"address":"198.18.7.201/24"}]}}' \
  2>/dev/null)
refused "ADD from inside a pod" 101 "only root outside pods" "$out" $?
out=$(ip netns exec "$a" env CNI_COMMAND=DEL CNI_CONTAINERID=sb-pod-1 CNI_IFNAME=eth0 \
  timeout 30 "$WCNI" <<<"$(wharf_conf "$E2E_SOCK" "$SUBNET" '{}')" 2>/dev/null)
refused "DEL from inside a pod" 101 "could not release" "$out" $?
out=$(wcni CHECK sb-c "$c" pod-c "$(wharf_conf "$E2E_SOCK" "$SUBNET" "${RESULT[$a]}")")
refused "nothing left of the refused ADDs" 102 "no registration" "$out" $?
chain CHECK "$a" pod-0 >/dev/null || e2e_fail "CHECK of pod-0 failed after the refused ADDs"

for i in 0 1; do
  pod=${PODS[$i]}
  chain DEL "$pod" "pod-$i" || e2e_fail "DEL of pod-$i failed"
  chain DEL "$pod" "pod-$i" || e2e_fail "second DEL of pod-$i failed"
done
out=$(wcni CHECK sb-pod-0 "$a" pod-0 "$(wharf_conf "$E2E_SOCK" "$SUBNET" "${RESULT[$a]}")")
refused "CHECK after DEL" 102 "no registration" "$out" $?
placed pod-0 "" || e2e_fail "DEL left pod-0's record at the orchestrator: $(ctl container show tenant t1)"
# The pod's name and address are free again.
wcni ADD sb-again "$a" pod-0 "$(wharf_conf "$E2E_SOCK" "$SUBNET" "${RESULT[$a]}")" >/dev/null ||
  e2e_fail "ADD after DEL failed"
# A router that has gone holds nothing: DEL succeeds.
kill "$E2E_ROUTER_PID" && wait "$E2E_ROUTER_PID"
E2E_ROUTER_PID=""
wcni DEL sb-again "$a" pod-0 "$(wharf_conf "$E2E_SOCK" "$SUBNET" '{}')" >/dev/null ||
  e2e_fail "DEL without a router failed"
e2e_log "PASS"
