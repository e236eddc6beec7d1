#!/usr/bin/env bash
# End-to-end test of the host links' security (issue #19; docs/SECURITY.md) on a three-host
# wharf-lab with encrypted links (wharfd --link-security encrypt) and the nftables guard
# (wharf-lab up --guard):
# - while ib_write_bw runs between containers on h1 and h2, forged routers connect to h2's
#   link port from host h3's namespace, each claiming to be h1: one speaking plaintext, one
#   with a certificate for h1 that another CA signed, one with h3's own (valid)
#   certificate, and one replaying, byte for byte, a handshake recorded with h1's own
#   certificate; h2 disconnects each within 5 s, counts them (refused_peers), and the
#   transfer finishes;
# - a container can open no connection to its own or another host's router (link and express
#   ports), but still reaches a container on another host;
# - data crosses the encrypted links intact (ibv_rc_pingpong -c checks every buffer).
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_security_test.sh
#
# Exit 77 (skipped) when not root or without python3/openssl. Bounded: every wait has a
# timeout; the trap tears down.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail, e2e_perftest_clock_failed
readonly NAMES=(secA$$ secB$$ secC$$ secD$$)
e2e_lab_script lab_security_test python3 openssl nft

timeout 60 "$LAB" up --hosts 3 --guard --wharfd "$BIN/wharfd" -- --link-security encrypt \
  > "$TMP/up.log" 2>&1 || e2e_lab_fail "wharf-lab up --guard -- --link-security encrypt"
H1=/run/wharf-lab/h1/wharfd.sock
H2=/run/wharf-lab/h2/wharfd.sock
TLS=/run/wharf-lab/tls
# ctr SOCK NAME VIP CMD...: CMD in a container on the host of router socket SOCK.
ctr() {
  local sock=$1 name=$2 vip=$3
  shift 3
  timeout 60 "$BIN/wharf-run" --router "$sock" --name "$name" --vip "$vip" -- "$@"
}

# --- The guard: a container reaches no router, but does reach a container on another host.
ctr "$H1" "${NAMES[2]}" 198.18.1.66 bash -c '
  for target in 198.19.0.1:4791 198.19.0.1:4792 198.19.0.2:4791 198.19.0.2:4792 198.18.1.1:4791; do
    if timeout 3 bash -c "exec 3<>/dev/tcp/${target%:*}/${target#*:}" 2> /dev/null; then
      echo "open $target"
    else
      echo "closed $target"
    fi
  done' > "$TMP/guard.log" 2>&1 || e2e_lab_fail "the guard probe container failed"
grep -q "^open" "$TMP/guard.log" && e2e_lab_fail "a container reached a router: $(grep '^open' "$TMP/guard.log")"
(($(grep -c "^closed" "$TMP/guard.log") == 5)) || e2e_lab_fail "guard probe: $(cat "$TMP/guard.log")"
ctr "$H2" "${NAMES[0]}" 198.18.2.30 perl "$HERE/tcp_pong.pl" 18515 > "$TMP/pong.log" 2>&1 &
PIDS+=($!)
got=
for _ in $(seq 100); do
  got=$(ctr "$H1" "${NAMES[1]}" 198.18.1.30 \
    bash -c 'exec 3<>/dev/tcp/198.18.2.30/18515 && head -n 1 <&3' 2> /dev/null) && break
  sleep 0.1
done
[[ $got == pong ]] || e2e_lab_fail "with the guard, TCP between containers on h1 and h2: got '$got'"
wait "${PIDS[-1]}" || e2e_lab_fail "the pong container failed"
echo "lab_security_test: the guard keeps containers off the routers; containers still talk"

# --- Forged routers against h2 while a transfer between h1 and h2 runs.
timeout 30 "$LAB" certs "$TMP/other-ca" h1 || e2e_lab_fail "certificates of another CA"
transfer() {
  ctr "$H1" "${NAMES[0]}" 198.18.1.11 ib_write_bw -d wharf0 -D 8 > "$TMP/bw.server.log" 2>&1 &
  local sp=$!
  sleep 1
  ctr "$H2" "${NAMES[1]}" 198.18.2.12 ib_write_bw -d wharf0 -D 8 198.18.1.11 \
    > "$TMP/bw.client.log" 2>&1 &
  local cp=$!
  sleep 3
  forge plaintext
  forge other-ca --cert "$TMP/other-ca/h1.pem" --key "$TMP/other-ca/h1.key" --encrypt
  forge h3-as-h1 --cert "$TLS/h3.pem" --key "$TLS/h3.key" --encrypt
  forge replayed --cert "$TLS/h1.pem" --key "$TLS/h1.key" --replay
  wait "$cp" && wait "$sp"
}
forge() {
  local label=$1
  shift
  if ! ip netns exec wharf-lab-h3 timeout 20 /usr/bin/python3 "$HERE/forge_peer.py" 198.19.0.2 4791 h1 \
    "$@" > "$TMP/forge.$label.log" 2>&1; then
    e2e_lab_fail "forged peer ($label) was not refused: $(tail -1 "$TMP/forge.$label.log")"
  fi
  echo "lab_security_test: forged peer ($label): $(tail -1 "$TMP/forge.$label.log")"
}
refused_before=$(grep -c "failed to authenticate\|does not name it" /run/wharf-lab/h2/wharfd.log)
for attempt in 1 2 3; do
  transfer && break
  if ((attempt == 3)) || ! e2e_perftest_clock_failed "$TMP"/bw.*.log; then
    e2e_lab_fail "ib_write_bw between h1 and h2 failed while forged peers connected"
  fi
  echo "lab_security_test: perftest could not calibrate its clock (machine busy); again"
done
echo "lab_security_test: ib_write_bw during the forgeries: $(grep -E '^ *[0-9]+ +[0-9]+ ' \
  "$TMP/bw.client.log" | tail -1)"
refused_after=$(grep -c "failed to authenticate\|does not name it" /run/wharf-lab/h2/wharfd.log)
((refused_after - refused_before >= 4)) ||
  e2e_lab_fail "h2 logged $((refused_after - refused_before)) refusals for 4 forged peers (per attempt)"
kill -USR1 "$(cat /run/wharf-lab/h2/wharfd.pid)"
for _ in $(seq 50); do grep -q "refused_peers=" /run/wharf-lab/h2/wharfd.log && break; sleep 0.1; done
count=$(grep -o "refused_peers=[0-9]*" /run/wharf-lab/h2/wharfd.log | tail -1 | cut -d= -f2)
((${count:-0} >= 4)) || e2e_lab_fail "h2 counts refused_peers=${count:-none}, want at least 4"
grep -q "restarted\|incarnation" /run/wharf-lab/h2/wharfd.log &&
  e2e_lab_fail "a forged peer changed what h2 knows of h1"

# --- Data crosses the encrypted links intact.
ctr "$H1" "${NAMES[0]}" 198.18.1.10 ibv_rc_pingpong -d wharf0 -n 200 -s 65536 -c \
  > "$TMP/pingpong.server.log" 2>&1 &
PIDS+=($!)
sleep 0.5
ctr "$H2" "${NAMES[1]}" 198.18.2.10 ibv_rc_pingpong -d wharf0 -n 200 -s 65536 -c 198.18.1.10 \
  > "$TMP/pingpong.client.log" 2>&1 || e2e_lab_fail "ibv_rc_pingpong -c across encrypted links"
wait "${PIDS[-1]}" || e2e_lab_fail "ibv_rc_pingpong -c server"
grep -q "200 iters" "$TMP/pingpong.client.log" || e2e_lab_fail "ibv_rc_pingpong: $(tail -2 "$TMP/pingpong.client.log")"
echo "lab_security_test: ibv_rc_pingpong -c over encrypted links: $(grep iters "$TMP/pingpong.client.log")"
echo "lab_security_test: PASS"
