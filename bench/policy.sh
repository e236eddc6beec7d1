#!/usr/bin/env bash
# Wharf's control-plane goals (issue #4), measured in one run:
#   - rate limits: ib_write_bw (64 KiB WRITEs, 5 s) from a container limited to 100 Mbit/s,
#     1 Gbit/s and 5 Gbit/s, as a ratio of the limit (goal: 0.95-1.05), and unlimited for
#     reference;
#   - policy to enforcement: from `wharfctl ratelimit set` starting to the router applying the
#     new limit (its log line), median and worst of 20 changes (goal: < 1 s);
#   - orchestrator operations per second on each store backend (SQLite, etcd): container
#     create (address and LID allocation), policy update, delete; 1 and 8 client threads.
#
#   sudo bash bench/policy.sh [REPS]   # REPS runs of each rate (default 3); medians shown
#
# Builds a Release tree in build-bench/, starts a private orchestrator (SQLite), router and
# two wharf-run containers (198.18.78.0/24 on wharf-run's bridge), and prints a markdown
# table (also written to build-bench/policy-results.md). Needs root and the packages of
# scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
REPS=${1:-3}
B=$ROOT/build-bench
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF > /dev/null
cmake --build "$B" -j"$(nproc)" --target wharfd wharf_verbs wharf-run wharfctl wharf-orchestrator > /dev/null

WORK=$(mktemp -d /tmp/wharf-policy-bench.XXXXXX)
PIDS=()
NAMES=(bs$$ bc$$)
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null || true; done
  for n in "${NAMES[@]}"; do "$B/bin/wharf-run" --cleanup "$n" > /dev/null 2>&1 || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"  # median, free_port, wait_http, start_etcd
ctl() { "$B/bin/wharfctl" "$@"; }

PORT=$(free_port)
export WHARF_ORCHESTRATOR=http://127.0.0.1:$PORT
export WHARF_TOKEN_FILE=$WORK/admin.token # the orchestrator's first start writes it
"$B/bin/wharf-orchestrator" --listen "127.0.0.1:$PORT" --store "sqlite:$WORK/orch.db" \
  --admin-token-file "$WHARF_TOKEN_FILE" > "$WORK/orch.log" 2>&1 &
PIDS+=($!)
wait_http "$WHARF_ORCHESTRATOR/v1/tenants"
SOCK=$WORK/wharfd.sock
"$B/bin/wharfd" --socket "$SOCK" --host b1 --orchestrator "$WHARF_ORCHESTRATOR" > "$WORK/wharfd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.05; done
ctl tenant add bench
ctl network add n tenant bench cidr 198.18.78.0/24
ctl container add bs$$ tenant bench network n host b1 > /dev/null
ctl container add bc$$ tenant bench network n host b1 > /dev/null
SERVER=$(ctl -j container show tenant bench | python3 -c "import json,sys; print([c['vip'] for c in json.load(sys.stdin) if c['name']=='bs$$'][0])")
run_in() {
  local name=$1
  shift
  "$B/bin/wharf-run" --router "$SOCK" --lib-dir "$B/lib" --tenant bench --network n --name "$name" -- "$@"
}

# write_gbits: one 5 s ib_write_bw from bc to bs; prints the average Gbit/s.
PP=19600
write_gbits() {
  PP=$((PP + 1))
  run_in bs$$ ib_write_bw -d wharf0 -p $PP -D 5 --report_gbits > "$WORK/srv.log" 2>&1 &
  local srv=$!
  sleep 1
  run_in bc$$ ib_write_bw -d wharf0 -p $PP -D 5 --report_gbits "$SERVER" > "$WORK/cli.log" 2>&1 || true
  wait $srv || true
  awk '$1 == 65536 { print $4 }' "$WORK/cli.log"
}
# set_rate RATE: applies a container-wide limit to bc and waits until the router has it.
set_rate() {
  local before
  if [[ $1 == none ]]; then  # no change to wait for when it had no limit
    ctl ratelimit del bc$$ tenant bench > /dev/null
    sleep 0.5
    return 0
  fi
  before=$(grep -c "bench/bc$$: policy" "$WORK/wharfd.log" || true)
  ctl ratelimit set bc$$ tenant bench rate "$1" > /dev/null
  for _ in $(seq 100); do
    [[ $(grep -c "bench/bc$$: policy" "$WORK/wharfd.log") -gt $before ]] && return 0
    sleep 0.01
  done
  echo "the router did not apply rate $1" >&2
  return 1
}

declare -A GOT
for rate in none 100mbit 1gbit 5gbit; do
  set_rate $rate
  GOT[$rate]=$(for _ in $(seq "$REPS"); do write_gbits; done | median)
done

# Policy to enforcement: wharfctl's start to the router's log line (millisecond stamps).
lat=()
for i in $(seq 20); do
  before=$(grep -c "bench/bc$$: policy" "$WORK/wharfd.log" || true)
  t0=$(date +%s.%N)
  ctl ratelimit set bc$$ tenant bench rate "$((100 + i))mbit" > /dev/null
  for _ in $(seq 200); do [[ $(grep -c "bench/bc$$: policy" "$WORK/wharfd.log") -gt $before ]] && break; sleep 0.005; done
  stamp=$(grep "bench/bc$$: policy" "$WORK/wharfd.log" | tail -1 | sed -E 's/^\[([^]]+)\].*/\1/')
  t1=$(date -d "$stamp" +%s.%N)
  lat+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b - a) * 1000}')")
done
lat_med=$(printf '%s\n' "${lat[@]}" | median)
lat_max=$(printf '%s\n' "${lat[@]}" | sort -g | tail -1)

# Orchestrator operations on each backend (fresh orchestrators; etcd on loopback).
ops() {  # ops STORE: "create/policy/delete" ops/s for 1 and 8 threads
  local port out1 out8
  port=$(free_port)
  local token=$WORK/ops-$port.token
  "$B/bin/wharf-orchestrator" --listen "127.0.0.1:$port" --store "$1" --admin-token-file "$token" \
    > "$WORK/ops-orch.log" 2>&1 &
  local pid=$!
  wait_http "http://127.0.0.1:$port/v1/tenants"
  out1=$(WHARF_TOKEN_FILE=$token python3 bench/orchestrator_ops.py "http://127.0.0.1:$port" 300 1)
  out8=$(WHARF_TOKEN_FILE=$token python3 bench/orchestrator_ops.py "http://127.0.0.1:$port" 800 8)
  kill $pid && wait $pid 2> /dev/null || true
  for op in create policy delete; do
    echo "$op $(awk -v o=$op '$1 == o {print $2}' <<< "$out1") $(awk -v o=$op '$1 == o {print $2}' <<< "$out8")"
  done
}
SQLITE_OPS=$(ops "sqlite:$WORK/ops.db")
start_etcd "$WORK"
PIDS+=("$ETCD_PID")
ETCD_OPS=$(ops "etcd:$ETCD_URL")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
{
  echo "| Figure | Result | Goal |"
  echo "|---|---|---|"
  echo "| ib_write_bw, no limit | ${GOT[none]} Gbit/s | (reference) |"
  echo "| ib_write_bw at 100 Mbit/s | ${GOT[100mbit]} Gbit/s = $(ratio "${GOT[100mbit]}" 0.1) x limit | 0.95-1.05 |"
  echo "| ib_write_bw at 1 Gbit/s | ${GOT[1gbit]} Gbit/s = $(ratio "${GOT[1gbit]}" 1) x limit | 0.95-1.05 |"
  echo "| ib_write_bw at 5 Gbit/s | ${GOT[5gbit]} Gbit/s = $(ratio "${GOT[5gbit]}" 5) x limit | 0.95-1.05 |"
  echo "| policy change to enforcement, median / worst of 20 | $lat_med / $lat_max ms | < 1000 ms |"
  while read -r op one eight; do
    echo "| orchestrator $op, SQLite, 1 / 8 clients | $one / $eight ops/s | measured |"
  done <<< "$SQLITE_OPS"
  while read -r op one eight; do
    echo "| orchestrator $op, etcd, 1 / 8 clients | $one / $eight ops/s | measured |"
  done <<< "$ETCD_OPS"
} | tee "$B/policy-results.md"
