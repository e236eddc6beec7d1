#!/usr/bin/env bash
# wharf-orchestrator and wharfctl as an operator uses them, on one store backend:
#   orchestrator_test.sh sqlite|etcd
# Tenants, networks and containers through wharfctl (text and -j output, errors for bad
# input), a container moved to another host keeps its address, a SIGKILLed orchestrator
# restarted on the same store has lost nothing, and a router (wharfd --orchestrator) keeps
# its host's entry, with its LID range, alive until it is killed, after which the entry
# expires with its lease. A container has no LID until it is placed on a registered host,
# then one of that host's range. Credentials: the first start writes an admin token; wharfctl
# without one, or with a deleted one, is refused; a tenant-admin token made with `wharfctl
# token add` sees and changes its own tenant only; the audit log names who changed what. A
# router joins with a one-time join token (a certificate for its host, a host token) once.
# Needs WHARF_BIN_DIR (wharf-orchestrator, wharfctl, wharfd); etcd for the etcd backend (exit
# 77 if missing). Everything it starts listens on loopback and is removed on exit.
set -uo pipefail
BACKEND=${1:?sqlite or etcd}
BIN=${WHARF_BIN_DIR:?}
WORK=$(mktemp -d /tmp/wharf-orch-test.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null; wait "$p" 2> /dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_http URL: until something answers there (10 s at most).
wait_http() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  return 1
}

if [[ $BACKEND == etcd ]]; then
  command -v etcd > /dev/null || { echo "etcd not installed"; exit 77; }
  EP=$(free_port)
  PP=$(free_port)
  etcd --name default --data-dir "$WORK/etcd" \
    --listen-client-urls "http://127.0.0.1:$EP" --advertise-client-urls "http://127.0.0.1:$EP" \
    --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
    --initial-cluster "default=http://127.0.0.1:$PP" > "$WORK/etcd.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$EP/version" || fail "etcd did not start"
  STORE="etcd:http://127.0.0.1:$EP"
else
  STORE="sqlite:$WORK/orchestrator.db"
fi

PORT=$(free_port)
export WHARF_ORCHESTRATOR="http://127.0.0.1:$PORT"
export WHARF_TOKEN_FILE=$WORK/admin.token # what wharfctl and wharfd present
start_orchestrator() {
  "$BIN/wharf-orchestrator" --listen "127.0.0.1:$PORT" --store "$STORE" \
    --admin-token-file "$WHARF_TOKEN_FILE" --audit-log "$WORK/audit.log" >> "$WORK/orch.log" 2>&1 &
  ORCH=$!
  PIDS+=("$ORCH")
  wait_http "$WHARF_ORCHESTRATOR/v1/tenants" || fail "orchestrator did not start: $(cat "$WORK/orch.log")"
  [[ -s $WHARF_TOKEN_FILE ]] || fail "no admin token in $WHARF_TOKEN_FILE: $(cat "$WORK/orch.log")"
}
ctl() { "$BIN/wharfctl" "$@"; }
# expect_fail CODE WORDS -- ARGS: wharfctl exits CODE and its message contains WORDS.
expect_fail() {
  local code=$1 words=$2
  shift 3
  local out
  out=$(ctl "$@" 2>&1)
  local rc=$?
  [[ $rc == "$code" ]] || fail "wharfctl $*: exit $rc, expected $code ($out)"
  [[ $out == *"$words"* ]] || fail "wharfctl $*: '$out' does not say '$words'"
}

start_orchestrator
[[ $(stat -c %a "$WHARF_TOKEN_FILE") == 600 ]] || fail "the admin token's file is not mode 600"
expect_fail 1 "is empty" -- -t /dev/null tenant show
WHARF_TOKEN_FILE= WHARF_TOKEN= expect_fail 1 "needs a token" -- tenant show
WHARF_TOKEN_FILE= WHARF_TOKEN=wharf_nonsense expect_fail 1 "unknown" -- tenant show
ctl tenant add red || fail "tenant add"
ctl tenant add blue || fail "tenant add"
ctl network add net1 tenant red cidr 198.18.1.0/24 || fail "network add"
ctl network add net1 tenant blue cidr 198.18.1.0/24 || fail "overlapping networks of two tenants"
expect_fail 1 "overlaps" -- network add net2 tenant red cidr 198.18.0.0/16
expect_fail 1 "CIDR" -- network add net2 tenant red cidr 198.18.1.300/24
expect_fail 1 "no tenant" -- network add net2 tenant green cidr 198.18.2.0/24
expect_fail 2 "unknown keyword" -- network add net2 tenant red cdir 198.18.2.0/24
expect_fail 2 "missing 'cidr" -- network add net2 tenant red
expect_fail 2 "unknown object" -- bogus show

out=$(ctl container add c1 tenant red network net1 host h1) || fail "container add"
[[ $out == "container c1 tenant red network net1 vip 198.18.1.2 host h1 lid - gid ::ffff:198.18.1.2 priority 0" ]] ||
  fail "add printed '$out'"
ctl container add c1 tenant blue network net1 host h2 vip 198.18.1.2 > /dev/null || fail "same vIP in another tenant"
expect_fail 1 "taken" -- container add c2 tenant red network net1 host h1 vip 198.18.1.2
expect_fail 1 "no container" -- container del nosuch tenant red
ctl container set c1 tenant red host h3 > /dev/null || fail "container set host"
json=$(ctl -j container show tenant red) || fail "container show -j"
python3 - "$json" << 'EOF' || fail "JSON: $json"
import json, sys
c = json.loads(sys.argv[1])
assert len(c) == 1 and c[0]["name"] == "c1" and c[0]["vip"] == "198.18.1.2" and c[0]["host"] == "h3", c
EOF
[[ $(ctl container show | wc -l) == 2 ]] || fail "container show lists both tenants"

# Policies: quotas, rate limits and the priority class live in the container's record.
ctl quota set c1 tenant red qp 4 mr_bytes 1gb > /dev/null || fail "quota set"
ctl ratelimit set c1 tenant red rate 2.5gbit qp_rate 100mbit > /dev/null || fail "ratelimit set"
ctl container set c1 tenant red priority 5 > /dev/null || fail "priority set"
[[ $(ctl quota show c1 tenant red) == "quota c1 tenant red qp 4 cq unlimited mr unlimited pd unlimited srq unlimited mr_bytes 1073741824" ]] ||
  fail "quota show: $(ctl quota show c1 tenant red)"
[[ $(ctl ratelimit show tenant red) == "ratelimit c1 tenant red rate 2500mbit qp_rate 100mbit burst default" ]] ||
  fail "ratelimit show: $(ctl ratelimit show tenant red)"
expect_fail 2 "negative" -- ratelimit set c1 tenant red rate -1gbit
expect_fail 2 "unknown rate unit" -- ratelimit set c1 tenant red rate 1gbitz
expect_fail 2 "unknown keyword" -- quota set c1 tenant red qps 4
expect_fail 1 "no container" -- quota set nosuch tenant red qp 1
expect_fail 1 "priority must be 0-7" -- container set c1 tenant red priority 8
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"ratelimit": {"rate": -5}}' \
  -H "Authorization: Bearer $(cat "$WHARF_TOKEN_FILE")" "$WHARF_ORCHESTRATOR/v1/tenants/red/containers/c1/policy")
[[ $code == 400 ]] || fail "a negative rate through the API answered $code"

# A killed orchestrator loses nothing.
kill -9 "$ORCH"
wait "$ORCH" 2> /dev/null
start_orchestrator
out=$(ctl container show tenant red) || fail "show after restart"
[[ $out == "container c1 tenant red network net1 vip 198.18.1.2 host h3 lid "* ]] || fail "after restart: '$out'"
[[ $(ctl network show tenant red) == "network net1 cidr 198.18.1.0/24" ]] || fail "networks after restart"
[[ $(ctl quota show c1 tenant red) == *" qp 4 "* && $(ctl ratelimit show c1 tenant red) == *"rate 2500mbit"* ]] ||
  fail "policies after restart: $(ctl quota show c1 tenant red); $(ctl ratelimit show c1 tenant red)"

# A router registers its host, with its LIDs, on a lease that lapses when the router dies.
"$BIN/wharfd" --socket "$WORK/wharfd.sock" --host hr1 --orchestrator "$WHARF_ORCHESTRATOR" \
  --host-ttl 2 --lid-base 2001 --lid-count 100 > "$WORK/wharfd.log" 2>&1 &
ROUTER=$!
PIDS+=("$ROUTER")
HOST_LINE="host hr1 address 127.0.0.1 lid_first 2001 lid_last 2100 subnet - lease "
for _ in $(seq 100); do
  [[ $(ctl host show) == "$HOST_LINE"* ]] && break
  sleep 0.1
done
[[ $(ctl host show) == "$HOST_LINE"* ]] ||
  fail "the router's host is not listed: $(ctl host show); $(cat "$WORK/wharfd.log")"
out=$(ctl container set c1 tenant red host hr1) || fail "container set host hr1"
[[ $out == *" host hr1 lid 2001 "* ]] || fail "a container on hr1 has no LID of its range: '$out'"
sleep 3 # longer than the TTL: the router keeps its entry alive
[[ -n $(ctl host show) ]] || fail "the live router's entry lapsed"
kill -9 "$ROUTER"
wait "$ROUTER" 2> /dev/null
for _ in $(seq 100); do
  [[ -z $(ctl host show) ]] && break
  sleep 0.1
done
[[ -z $(ctl host show) ]] || fail "the dead router's host entry did not expire"

# A router joins with a one-time join token: it gets a certificate of the orchestrator's
# cluster CA for its host, and a host token it then registers with; the token is used up.
ctl token add join host hr2 > "$WORK/join.out" || fail "token add join"
tail -1 "$WORK/join.out" > "$WORK/join.token"
join_router() { # join_router LINK-DIR: wharfd hr2 joining with join.token, its own token only
  env -u WHARF_TOKEN_FILE "$BIN/wharfd" --socket "$WORK/wharfd2.sock" --host hr2 \
    --orchestrator "$WHARF_ORCHESTRATOR" --join-token-file "$WORK/join.token" --link-dir "$1" \
    --host-ttl 2 --lid-base 2201 --lid-count 10 > "$WORK/wharfd2.log" 2>&1 &
  ROUTER=$!
  PIDS+=("$ROUTER")
}
join_router "$WORK/link"
for _ in $(seq 100); do
  ctl host show | grep -q "^host hr2 " && break
  sleep 0.1
done
ctl host show | grep -q "^host hr2 " ||
  fail "the joined router did not register with its host token: $(cat "$WORK/wharfd2.log")"
openssl verify -CAfile "$WORK/link/ca.pem" "$WORK/link/host.pem" > /dev/null ||
  fail "the joined router's certificate is not the cluster CA's"
openssl x509 -in "$WORK/link/host.pem" -noout -ext subjectAltName | grep -q "DNS:hr2" ||
  fail "the certificate does not name hr2"
[[ $(stat -c %a "$WORK/link/host.key") == 600 ]] || fail "the router's key is not private"
[[ -z $(ctl token show | grep " role join ") ]] || fail "the join token outlived its use"
kill -9 "$ROUTER"
wait "$ROUTER" 2> /dev/null
join_router "$WORK/link" # joined already: the used token is not needed again
sleep 1
kill -0 "$ROUTER" 2> /dev/null || fail "a joined router did not restart: $(cat "$WORK/wharfd2.log")"
kill -9 "$ROUTER"
wait "$ROUTER" 2> /dev/null
join_router "$WORK/link2" # a used token joins no one
wait "$ROUTER"
rc=$?
[[ $rc == 1 ]] && grep -q "refused the join token" "$WORK/wharfd2.log" ||
  fail "a used join token: exit $rc, $(cat "$WORK/wharfd2.log")"

ctl container del c1 tenant red || fail "container del"
expect_fail 1 "still has" -- tenant del blue

# A tenant-admin token: its own tenant only; deleted, it is refused.
ctl token add tenant-admin tenant blue name ci > "$WORK/blue.out" || fail "token add"
[[ $(head -1 "$WORK/blue.out") == "token "*" role tenant-admin" ]] || fail "token add printed $(cat "$WORK/blue.out")"
tail -1 "$WORK/blue.out" > "$WORK/blue.token"
blue_id=$(head -1 "$WORK/blue.out" | cut -d' ' -f2)
[[ $(ctl token show | grep -c "^token $blue_id role tenant-admin tenant blue name ci ") == 1 ]] ||
  fail "token show: $(ctl token show)"
[[ $(ctl -t "$WORK/blue.token" tenant show) == "tenant blue" ]] || fail "blue's admin sees $(ctl -t "$WORK/blue.token" tenant show)"
ctl -t "$WORK/blue.token" network add net2 tenant blue cidr 198.18.7.0/24 || fail "blue's admin cannot add to blue"
expect_fail 1 "may not" -- -t "$WORK/blue.token" network add net2 tenant red cidr 198.18.7.0/24
expect_fail 1 "may not" -- -t "$WORK/blue.token" tenant add green
expect_fail 1 "may not" -- -t "$WORK/blue.token" token show
ctl token del "$blue_id" || fail "token del"
expect_fail 1 "unknown" -- -t "$WORK/blue.token" tenant show
grep -q '"method":"POST","path":"/v1/tenants/red/networks","role":"tenant-admin","status":403,"tenant":"blue"' "$WORK/audit.log" ||
  fail "the audit log lacks blue's refused change: $(tail -3 "$WORK/audit.log")"
echo "PASS ($BACKEND)"
