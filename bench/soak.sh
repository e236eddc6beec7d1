#!/usr/bin/env bash
# The restart soak (issue #23, item 5): wharf-soak's PAIRS RC QP pairs (2 x PAIRS QPs) of mixed
# operations (SEND, WRITE, READ, FETCH_ADD, each checked: bench/soak.cc) across three
# wharf-lab hosts for MINUTES, while every minute one host's router (h1, h2, h3 in turn) is
# killed (SIGKILL) and started again 0.5 s later with the same command line, and every 90 s
# one host's link (h3, h2, h1 in turn) is cut for 2 s. Samples every router's RSS every 10 s.
# Passes if wharf-soak ends with no error; prints the routers' RSS at the first and the last
# sample of each process, and the largest.
#
# EXPRESS (wharfd --express, default on as wharfd's): small SENDs over express lines.
#
#   sudo bash bench/soak.sh [BUILD] [MINUTES] [PAIRS] [EXPRESS]    # e.g. build 10 256 on
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh  # lab_bench_checks, lab_bench_work
BUILD=$(readlink -f "${1:-build}")
MINUTES=${2:-10}
PAIRS=${3:-256}
EXPRESS=${4:-on}
readonly DEAD_S=0.5 CUT_S=2
LAB=$PWD/tools/wharf-lab/wharf-lab
lab_bench_checks soak.sh "$BUILD"
[[ -x $BUILD/bin/wharf-soak ]] || { echo "soak.sh: $BUILD has no bin/wharf-soak" >&2; exit 1; }
lab_bench_work soak
# The run's logs outlive it in $LOGS (the lab's routers' too).
LOGS=/tmp/wharf-soak-last
bench_cleanup() {
  for h in 1 2 3; do ip -n "wharf-lab-h$h" link set eth0 up 2> /dev/null || true; done
  [[ -n ${soak:-} ]] && kill "$soak" 2> /dev/null
  rm -rf "$LOGS"
  mkdir -p "$LOGS"
  cp "$WORK"/* "$LOGS/" 2> /dev/null
  for h in 1 2 3; do cp "/run/wharf-lab/h$h/wharfd.log" "$LOGS/h$h-wharfd.log" 2> /dev/null; done
  return 0
}
"$LAB" up --hosts 3 --wharfd "$BUILD/bin/wharfd" -- --express "$EXPRESS" > "$WORK/lab.log" 2>&1 || {
  echo "soak.sh: wharf-lab up failed: $(tail -1 "$WORK/lab.log")" >&2
  exit 1
}
sock() { echo "/run/wharf-lab/h$1/wharfd.sock"; }
pid_of() { pgrep -f "wharfd --socket $(sock "$1")" | head -1; }
declare -A cmd
for h in 1 2 3; do cmd[$h]=$(tr '\0' ' ' < "/proc/$(pid_of "$h")/cmdline"); done

LD_PRELOAD=$BUILD/lib/libibverbs.so.1 \
  "$BUILD/bin/wharf-soak" $((MINUTES * 60)) "$PAIRS" "$(sock 1)" "$(sock 2)" "$(sock 3)" \
  > "$WORK/soak.out" 2> "$WORK/soak.err" &
soak=$!
echo "soak: $((2 * PAIRS)) QPs across 3 hosts for $MINUTES min (log: $WORK/soak.out)"

# RSS samples: "<seconds> <host> <pid> <kB>".
t0=$SECONDS
kills=0 cuts=0
next_kill=60 next_cut=90 next_sample=0
while kill -0 "$soak" 2> /dev/null; do
  t=$((SECONDS - t0))
  if ((t >= next_sample)); then
    for h in 1 2 3; do
      p=$(pid_of "$h") || continue
      echo "$t $h $p $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2> /dev/null || echo 0)"
    done >> "$WORK/rss"
    next_sample=$((next_sample + 10))
  fi
  if ((t >= next_kill && t < MINUTES * 60)); then
    h=$((kills % 3 + 1))
    kill -KILL "$(pid_of "$h")"
    sleep "$DEAD_S"
    ip netns exec "wharf-lab-h$h" sh -c "${cmd[$h]} >> $WORK/h$h.log 2>&1 &"
    echo "t=$t s: h$h's router killed and started again"
    kills=$((kills + 1)) next_kill=$((next_kill + 60))
  fi
  if ((t >= next_cut && t < MINUTES * 60)); then
    h=$((3 - cuts % 3))
    ip -n "wharf-lab-h$h" link set eth0 down
    sleep "$CUT_S"
    ip -n "wharf-lab-h$h" link set eth0 up
    echo "t=$t s: h$h's link cut for $CUT_S s"
    cuts=$((cuts + 1)) next_cut=$((next_cut + 90))
  fi
  sleep 0.2
done
rc=0
wait "$soak" || rc=$?
soak=
echo "router RSS (kB) per process: first sample, last sample, largest"
awk '{k = $2 " " $3; if (!(k in first)) {first[k] = $4; order[++n] = k} last[k] = $4; if ($4 > max[k]) max[k] = $4}
     END {for (i = 1; i <= n; i++) {split(order[i], a, " "); printf "  h%s pid %s: %s, %s, %s\n", a[1], a[2], first[order[i]], last[order[i]], max[order[i]]}}' "$WORK/rss"
echo "$kills router kills, $cuts link cuts"
if ((rc == 0)); then
  echo "PASS: $(tail -1 "$WORK/soak.out")"
else
  echo "FAIL: $(tail -3 "$WORK/soak.err")"
  exit 1
fi
