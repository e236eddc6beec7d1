#!/usr/bin/env bash
# A/B of two builds' wharf-orchestrator in one run: operations per second through the HTTP
# API (bench/orchestrator_ops.py: container create, policy update, delete; 1 client thread
# and 8), on SQLite and on etcd, build A then build B, alternating ROUNDS times; medians and
# B/A. Every orchestrator starts on a fresh store (a new SQLite file, a new etcd). A build
# whose orchestrator writes an admin token (issue #19) is given it; an older one ignores it.
#
#   bash bench/ab_orchestrator.sh BUILD_A BUILD_B [ROUNDS]   # e.g. build-main build
#
# Needs etcd (etcd-server) and python3; everything listens on loopback.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
A=$(readlink -f "$1")
B=$(readlink -f "$2")
ROUNDS=${3:-2}
. bench/lib.sh # median, free_port, wait_http, start_etcd
for d in "$A" "$B"; do
  [[ -x $d/bin/wharf-orchestrator ]] || { echo "ab_orchestrator.sh: $d has no wharf-orchestrator" >&2; exit 1; }
done
command -v etcd > /dev/null || { echo "ab_orchestrator.sh: needs etcd" >&2; exit 1; }
WORK=$(mktemp -d /tmp/wharf-ab-orch.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# run BUILD NAME STORE: one orchestrator of BUILD on a fresh STORE (sqlite|etcd); appends
# "create1 policy1 delete1 create8 policy8 delete8" (ops/s) to WORK/NAME-STORE.
run() {
  local build=$1 name=$2 kind=$3 dir port url store etcd_pid=
  dir=$(mktemp -d "$WORK/run.XXXXXX")
  port=$(free_port)
  url=http://127.0.0.1:$port
  local n1=300 n8=800
  if [[ $kind == etcd ]]; then
    start_etcd "$dir"
    etcd_pid=$ETCD_PID
    PIDS+=("$etcd_pid")
    store=etcd:$ETCD_URL
    n1=100
    n8=200
  else
    store=sqlite:$dir/o.db
  fi
  local token_args=()
  if "$build/bin/wharf-orchestrator" --help 2>&1 | grep -q -- --admin-token-file; then
    token_args=(--admin-token-file "$dir/admin.token")
  fi
  "$build/bin/wharf-orchestrator" --listen "127.0.0.1:$port" --store "$store" "${token_args[@]}" \
    > "$dir/orch.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  wait_http "$url/v1/tenants"
  local tf=/dev/null
  [[ -s $dir/admin.token ]] && tf=$dir/admin.token
  local o1 o8
  o1=$(WHARF_TOKEN_FILE=$tf python3 bench/orchestrator_ops.py "$url" $n1 1)
  o8=$(WHARF_TOKEN_FILE=$tf python3 bench/orchestrator_ops.py "$url" $n8 8)
  kill "$pid" && wait "$pid" 2> /dev/null || true
  [[ -n $etcd_pid ]] && { kill "$etcd_pid" && wait "$etcd_pid" 2> /dev/null || true; }
  local line="" op
  for out in "$o1" "$o8"; do
    for op in create policy delete; do line+="$(awk -v o=$op '$1 == o {print $2}' <<< "$out") "; done
  done
  echo "$line" >> "$WORK/$name-$kind"
  echo "round: $name $kind $line" >&2
}

for _ in $(seq "$ROUNDS"); do
  for kind in sqlite etcd; do
    run "$A" A "$kind"
    run "$B" B "$kind"
  done
done

col() { awk -v c="$2" '{print $c}' "$WORK/$1" | median; }
echo "| ops/s, median of $ROUNDS | A | B | B/A |"
echo "|---|---|---|---|"
for kind in sqlite etcd; do
  c=0
  for clients in 1 8; do
    for op in create policy delete; do
      c=$((c + 1))
      a=$(col "A-$kind" $c)
      b=$(col "B-$kind" $c)
      awk -v k="$kind" -v o="$op" -v n="$clients" -v a="$a" -v b="$b" \
        'BEGIN {printf "| %s %s, %d client(s) | %.0f | %.0f | %.2f |\n", k, o, n, a, b, b / a}'
    done
  done
done
