#!/usr/bin/env bash
# Wharf's main demo, on the embedded defaults: one router (wharfd), two containers started
# with wharf-run (their own network namespaces, virtual IPs 198.18.0.10 and .11), and the
# unmodified Debian perftest `ib_write_bw` between them, then `ibv_rc_pingpong` with byte
# validation. Run as root on Debian 12; it installs packages and builds first.
# Cleans up everything it started (router, namespaces, temp dir) on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j"$(nproc)" --target wharfd wharf-run wharf_verbs wharf_rdmacm wharf_stub_mlx5 wharf_stub_efa \
  > /dev/null

BIN=$PWD/build/bin
WORK=$(mktemp -d /tmp/wharf-demo.XXXXXX)
SOCK=$WORK/wharfd.sock
ROUTER_PID=
cleanup() {
  [[ -n $ROUTER_PID ]] && kill "$ROUTER_PID" 2>/dev/null && wait "$ROUTER_PID" 2>/dev/null
  "$BIN/wharf-run" --cleanup demo-srv > /dev/null 2>&1 || true
  "$BIN/wharf-run" --cleanup demo-cli > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BIN/wharfd" --socket "$SOCK" > "$WORK/wharfd.log" 2>&1 &
ROUTER_PID=$!
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.05; done

run() { "$BIN/wharf-run" --router "$SOCK" "$@"; }
# Waits (bounded) until container $1's TCP port $2 listens, so the client does not race it.
wait_listen() {
  for _ in $(seq 200); do
    ip netns exec "wharf-$1" ss -ltn 2>/dev/null | grep -q ":$2 " && return 0
    sleep 0.05
  done
  return 1
}

echo "== The device as a container sees it"
run --name demo-cli --vip 198.18.0.11 -- ibv_devinfo -d wharf0 | grep -E "hca_id|state|port_lid|link_layer"
run --name demo-cli --vip 198.18.0.11 -- ibv_devinfo -v -d wharf0 | grep "GID\["

echo
echo "== ib_write_bw, 1 MiB messages, container demo-srv (198.18.0.10) <- demo-cli (198.18.0.11)"
run --name demo-srv --vip 198.18.0.10 -- ib_write_bw -d wharf0 -s 1048576 -n 5000 > "$WORK/srv.log" 2>&1 &
SRV=$!
wait_listen demo-srv 18515
timeout 120 "$BIN/wharf-run" --router "$SOCK" --name demo-cli --vip 198.18.0.11 -- \
  ib_write_bw -d wharf0 -s 1048576 -n 5000 198.18.0.10
wait "$SRV"

echo
echo "== ibv_rc_pingpong with buffer validation (-c), drop-in library mode"
run --dropin --name demo-srv --vip 198.18.0.10 -- ibv_rc_pingpong -d wharf0 -c -n 1000 > "$WORK/srv.log" 2>&1 &
SRV=$!
wait_listen demo-srv 18515
timeout 60 "$BIN/wharf-run" --router "$SOCK" --dropin --name demo-cli --vip 198.18.0.11 -- \
  ibv_rc_pingpong -d wharf0 -c -n 1000 198.18.0.10
wait "$SRV"
echo
echo "Demo finished: both containers used the software RNIC wharf0 served by one wharfd."
