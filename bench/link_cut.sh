#!/usr/bin/env bash
# What a 2 s cut of the path between two hosts costs a bulk transfer (issue #18, "Recovery"):
# ib_write_bw -u 19 (ACK timeout 2.1 s) of 64 KiB from a container on h1 to one on h2 while
# the lab's switch drops every frame for 2 s (an nftables rule on the bridge: both hosts'
# links stay up, as when a switch or cable in between fails). The cost is the time from the
# cut to the first megabyte acknowledged again on h1's host links, read off `ss -ti` every
# ~10 ms: the 2 s of the cut plus however long recovery takes after it.
#
#   sudo bash bench/link_cut.sh BUILD [BUILD_B] [REPS]    # e.g. build-main build 3
#
# With two builds, their rounds alternate. Each BUILD needs bin/wharfd, bin/wharf-run and
# lib/libibverbs.so.1. Needs root, perftest and nftables (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILDS=("$(readlink -f "$1")")
[[ $# -ge 2 && -d ${2:-} ]] && BUILDS+=("$(readlink -f "$2")") && shift
REPS=${2:-3}
LAB=$PWD/tools/wharf-lab/wharf-lab
readonly CUT_S=2
. bench/lib.sh  # median, lab_bench_checks, lab_bench_work
lab_bench_checks link_cut.sh "${BUILDS[@]}"
command -v nft > /dev/null || { echo "link_cut.sh: needs nftables" >&2; exit 1; }
build=
bench_cleanup() {
  if [[ -n $build ]]; then
    for n in lcA$$ lcB$$; do "$build/bin/wharf-run" --cleanup "$n" > /dev/null 2>&1 || true; done
  fi
}
lab_bench_work link-cut

# Samples "time total-bytes-acked" of h1's host-link connections until $1 (epoch s).
sample_acked() {
  while (($(date +%s) < $1)); do
    echo "$(date +%s.%N) $(ip netns exec wharf-lab-h1 ss -tin '( sport = :4791 or dport = :4791 )' |
      grep -o 'bytes_acked:[0-9]*' | awk -F: '{s += $2} END {print s + 0}')"
    sleep 0.01
  done
}

# One round with BUILD: prints the seconds from the cut to the first MB acknowledged after it.
round() {
  build=$1
  "$LAB" up --hosts 2 --wharfd "$build/bin/wharfd" > "$WORK/up.log"
  local args=(ib_write_bw -d wharf0 -s 65536 -u 19 --run_infinitely -D 1)
  timeout 40 "$build/bin/wharf-run" --router /run/wharf-lab/h2/wharfd.sock --name "lcA$$" \
    --vip 198.18.2.10 -- "${args[@]}" > "$WORK/srv.log" 2>&1 &
  sleep 0.5
  timeout 30 "$build/bin/wharf-run" --router /run/wharf-lab/h1/wharfd.sock --name "lcB$$" \
    --vip 198.18.1.10 -- "${args[@]}" 198.18.2.10 > "$WORK/cli.log" 2>&1 &
  sleep 5
  sample_acked "$(($(date +%s) + 10))" > "$WORK/acked.txt" &
  local sampler=$!
  sleep 2
  local cut_at
  cut_at=$(date +%s.%N)
  ip netns exec wharf-lab-sw nft -f - <<< \
    'table bridge cut { chain blackhole { type filter hook forward priority 0; policy drop; }; }'
  sleep "$CUT_S"
  ip netns exec wharf-lab-sw nft delete table bridge cut
  wait "$sampler"
  for n in lcA$$ lcB$$; do "$build/bin/wharf-run" --cleanup "$n" > /dev/null 2>&1 || true; done
  wait || true
  "$LAB" down > /dev/null
  awk -v cut="$cut_at" -v span="$CUT_S" '
    $1 > cut + span && last != "" && $2 - last > 1000000 { printf "%.2f\n", $1 - cut; found = 1; exit }
    { last = $2 }
    END { if (!found) print "none" }' "$WORK/acked.txt"
}


echo "Measuring ($REPS rounds of each build) ..." >&2
for _ in $(seq "$REPS"); do
  for i in "${!BUILDS[@]}"; do round "${BUILDS[$i]}" >> "$WORK/cost$i"; done
done
echo "| Build | cost of a ${CUT_S} s cut, each round (s) | median (s) |"
echo "|---|---|---|"
for i in "${!BUILDS[@]}"; do
  echo "| ${BUILDS[$i]} | $(paste -sd' ' "$WORK/cost$i") | $(grep -v none "$WORK/cost$i" | median) |"
done
