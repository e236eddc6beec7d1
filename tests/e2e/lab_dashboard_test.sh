#!/usr/bin/env bash
# The orchestrator's dashboard (issue #20) on a three-host `wharf-lab up --orchestrator` whose
# routers probe every 0.25 s, with a container on h1: `wharf-lab status` names the
# orchestrator and its admin token, and headless Chromium driven by Selenium
# (dashboard_check.py) signs in, sees every host, a 3x3 heatmap and the container, and sees
# h3's cells turn down when its switch port goes down and up when it comes back.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/lab_dashboard_test.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh" # e2e_lab_script (sets BIN, LAB, TMP), e2e_lab_fail
readonly NAMES=(ldA$$)
e2e_lab_script lab_dashboard_test chromium chromedriver
/usr/bin/python3 -c 'import selenium' 2> /dev/null || { echo "lab_dashboard_test: no python3-selenium; skipped"; exit 77; }

timeout 60 "$LAB" up --hosts 3 --orchestrator --wharfd "$BIN/wharfd" -- --pingmesh-interval 0.25 \
  > "$TMP/up.log" 2>&1 || e2e_lab_fail "wharf-lab up --orchestrator"
status=$("$LAB" status)
url=$(awk '$1 == "orchestrator" {print $2}' <<< "$status")
token=$(awk '$1 == "token" {print $2}' <<< "$status")
[[ -n $url && -r $token ]] || e2e_lab_fail "wharf-lab status names no orchestrator and token: $status"

timeout 90 "$BIN/wharf-run" --router /run/wharf-lab/h1/wharfd.sock --name "${NAMES[0]}" \
  --vip 198.18.1.10 -- sleep 80 > "$TMP/container.log" 2>&1 &
PIDS=($!)

timeout 120 /usr/bin/python3 "$HERE/dashboard_check.py" "$url" "$token" 3 "${NAMES[0]}" \
  "ip -n wharf-lab-sw link set port3 down" "ip -n wharf-lab-sw link set port3 up" \
  > "$TMP/check.log" 2>&1 || e2e_lab_fail "the dashboard: $(cat "$TMP/check.log")"
cat "$TMP/check.log"
echo "lab_dashboard_test: PASS"
