# Sourced by bench scripts that run perftest between wharf-lab hosts.
#
# lab_perftest BUILD COLUMN PROGRAM ARGS...: perftest's server in a container on h1 (vIP
# 198.18.1.10), its client in one on h2, with BUILD's wharf-run; prints the column of the
# client's result row. Runs again when perftest could not calibrate its clock
# (tests/e2e/lib.sh explains why that happens here). Uses $WORK for logs; the containers
# are named lpA<pid> and lpB<pid>.
lab_perftest() {
  local build=$1 col=$2
  shift 2
  for _ in 1 2 3; do
    timeout 120 "$build/bin/wharf-run" --router /run/wharf-lab/h1/wharfd.sock --name "lpA$$" \
      --vip 198.18.1.10 -- "$@" > "$WORK/srv.log" 2>&1 &
    local srv=$!
    sleep 0.5
    timeout 120 "$build/bin/wharf-run" --router /run/wharf-lab/h2/wharfd.sock --name "lpB$$" \
      --vip 198.18.2.10 -- "$@" 198.18.1.10 > "$WORK/cli.log" 2>&1 || true
    wait $srv || true
    grep -q "Correlation coefficient" "$WORK/cli.log" "$WORK/srv.log" || break
  done
  grep -E '^ *[0-9]+ +[0-9]+ ' "$WORK/cli.log" | tail -1 | awk -v c="$col" '{print $c}'
}
