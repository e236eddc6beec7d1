# shellcheck shell=bash
# Helpers the bench scripts share; sourced, never run.

# median: the median of the numbers on stdin, one per line (the mean of the middle two for
# an even count; nothing for none).
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }

# lab_bench_checks NAME [BUILD...]: what a bench on wharf-lab needs before it starts: root,
# each BUILD directory with bin/wharfd and bin/wharf-run, and no lab already up. Exits with
# NAME's message otherwise.
lab_bench_checks() {
  local name=$1 d
  shift
  ((EUID == 0)) || { echo "$name: needs root" >&2; exit 1; }
  for d in "$@"; do
    [[ -x $d/bin/wharfd && -x $d/bin/wharf-run ]] || { echo "$name: $d has no wharfd" >&2; exit 1; }
  done
  if ip netns list | grep -q '^wharf-lab-'; then
    echo "$name: a wharf-lab is up; take it down first (wharf-lab down)" >&2
    exit 1
  fi
}

# lab_bench_work NAME: makes WORK, a directory for the bench's files, and at exit runs the
# function bench_cleanup if the script has one, takes the lab ($LAB) down and removes WORK.
lab_bench_work() {
  WORK=$(mktemp -d "/tmp/wharf-$1.XXXXXX")
  trap lab_bench_cleanup EXIT
}
lab_bench_cleanup() {
  if declare -F bench_cleanup > /dev/null; then bench_cleanup || true; fi
  "$LAB" down > /dev/null 2>&1 || true
  rm -rf "$WORK"
}

# lab_bench_one_build NAME WORK_NAME BUILD [REPS]: the set-up of a bench of one build on
# wharf-lab, run from the project root as `bench/NAME BUILD [REPS]`: sets BUILD (absolute),
# REPS (default 3) and LAB, makes the checks (lab_bench_checks) and WORK (lab_bench_work), and
# brings in lab_perftest (bench/lab_perftest.sh).
# shellcheck disable=SC2034 # REPS is the calling bench's
lab_bench_one_build() {
  BUILD=$(readlink -f "$3")
  REPS=${4:-3}
  LAB=$PWD/tools/wharf-lab/wharf-lab
  lab_bench_checks "$1" "$BUILD"
  lab_bench_work "$2"
  # shellcheck source=bench/lab_perftest.sh
  . "$PWD/bench/lab_perftest.sh"
}

# ab_rounds ROUND REPS and ab_table A B REPS NAME...: the A/B benches' loop and report.
# ab_rounds calls `ROUND BUILD a|b` for $A and $B in turn, REPS times; each call appends one
# line of figures to $WORK/a or $WORK/b. ab_table prints, per column (named by the NAMEs in
# order), both builds' medians and B/A as a Markdown table.
ab_rounds() {
  local round=$1 reps=$2
  echo "Measuring ($reps rounds of each build, alternating) ..." >&2
  for _ in $(seq "$reps"); do
    "$round" "$A" a
    "$round" "$B" b
  done
}
ab_table() {
  local a=$1 b=$2 reps=$3 i=0 name va vb
  shift 3
  echo "| Figure (median of $reps) | A: $a | B: $b | B/A |"
  echo "|---|---|---|---|"
  for name in "$@"; do
    i=$((i + 1))
    va=$(awk -v c="$i" '{print $c}' "$WORK/a" | median)
    vb=$(awk -v c="$i" '{print $c}' "$WORK/b" | median)
    echo "| $name | $va | $vb | $(awk -v x="$va" -v y="$vb" 'BEGIN {printf "%.2f", y / x}') |"
  done
}

# free_port: a TCP port of loopback nobody listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_http URL: until something answers there (10 s at most).
wait_http() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }

# start_etcd DIR: a private etcd on loopback, its data in DIR; sets ETCD_URL
# (http://127.0.0.1:PORT) and ETCD_PID once it answers. The caller stops it.
start_etcd() {
  local ep pp
  ep=$(free_port)
  pp=$(free_port)
  etcd --name bench --data-dir "$1/etcd" --listen-client-urls "http://127.0.0.1:$ep" \
    --advertise-client-urls "http://127.0.0.1:$ep" --listen-peer-urls "http://127.0.0.1:$pp" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pp" --initial-cluster "bench=http://127.0.0.1:$pp" \
    > "$1/etcd.log" 2>&1 &
  ETCD_PID=$!
  ETCD_URL=http://127.0.0.1:$ep
  wait_http "$ETCD_URL/version"
}
