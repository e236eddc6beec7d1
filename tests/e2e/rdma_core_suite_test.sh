#!/usr/bin/env bash
# rdma-core's own provider test suite (python3-pyverbs ships it) in a container on wharf0:
# no test may fail or end in error, and the generic features Wharf implements must run, not
# skip (extended CQ and QP, the rdma_cm tests that need the device's netdev, ...). Prints
# what still skips for a generic feature. Argument: ib (default) or eth, the link layer.
#
#   WHARF_BIN_DIR=build/bin bash tests/e2e/rdma_core_suite_test.sh [ib|eth]
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly HERE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
LINK=${1:-ib}
[[ $LINK == eth ]] && export E2E_WHARFD_ARGS="--link-layer eth"
SUITE=/usr/share/doc/rdma-core/tests
e2e_init
[[ -f $SUITE/run_tests.py ]] || e2e_skip "python3-pyverbs is not installed"
e2e_start_router
cp -r "$SUITE" "$E2E_TMP/suite"
gunzip -f "$E2E_TMP"/suite/*.gz 2>/dev/null
# Debian's python3, which has pyverbs (not one earlier on PATH).
e2e_run_container suite "$(e2e_name S)" "$(e2e_vip 0)" preload 600 \
  sh -c "cd '$E2E_TMP/suite' && /usr/bin/python3 run_tests.py --dev wharf0 -v"
out=$E2E_TMP/suite.out
grep -qE "^Ran [0-9]+ tests" "$out" || e2e_fail "the suite did not run"
bad=$(grep -E '\.\.\. (ERROR|FAIL)$' "$out")
[[ -z $bad ]] || e2e_fail "failed or in error: $bad"
for t in test_phys_port_cnt_ex test_create_cq_ex test_rc_traffic_cq_ex test_ud_traffic_cq_ex \
  test_qp_ex_rc_send test_qp_ex_ud_send test_qp_ex_rc_rdma_write test_qp_ex_rc_rdma_read \
  test_qp_ex_rc_atomic_cmp_swp test_qp_ex_rc_atomic_fetch_add test_rdmacm_sync_traffic \
  test_rdmacm_async_traffic test_rdmacm_async_udp_traffic test_timestamp_real_time_rc_traffic test_mw_type1 \
  test_invalidate_mw_type1 test_mw_type2 test_mw_type2_invalidate_local \
  test_mw_type2_invalidate_remote test_mw_type2_invalidate_dealloc test_qp_ex_rc_bind_mw \
  test_rdmacm_async_multicast_traffic test_rdmacm_async_ex_multicast_traffic \
  test_rdmacm_async_ex_leave_multicast_traffic test_qp_ex_rc_atomic_write test_ro_xrc_traffic \
  test_xrc_atomic_fetch_and_add test_xrc_atomic_cmp_and_swap test_xrc_traffic_cq_ex \
  test_odp_xrc_traffic test_qp_ex_xrc_send test_qp_ex_xrc_send_imm test_import_dm \
  test_imported_rc_ex_rdma_write test_query_gid_ex_bad_flow test_tm_traffic test_tm_unexpected_tag \
  test_tm_no_tag test_tm_rndv; do
  grep -A1 -E "^$t " "$out" | grep -qE '\.\.\. ok$' || e2e_fail "$t did not pass"
done
# Raw Ethernet: RAW_PACKET QPs, flow steering and RSS exist on an Ethernet port only.
if [[ $LINK == eth ]]; then
  for t in test_eth_spec_flow_traffic test_ipv4_spec_flow_traffic test_ipv6_spec_flow_traffic \
    test_tcp_spec_flow_traffic test_udp_spec_flow_traffic test_rss_traffic \
    test_timestamp_real_time_raw_traffic; do
    grep -A1 -E "^$t " "$out" | grep -qE '\.\.\. ok$' || e2e_fail "$t did not pass"
  done
fi
# Vendor-only skips; converting a timestamp to ns is mlx5dv_get_clock_info's (mlx5 only).
vendor='MLX5|mlx5|Converting timestamp to nanoseconds|EFA|efa|cuda|CUDA|dmabuf|huge pages|PCI device'
echo "rdma-core suite ($LINK): $(grep -cE '\.\.\. ok$' "$out") ok; skipped for generic features:"
grep -E '\.\.\. skipped' "$out" | grep -vE "$vendor" | sed -E "s/.*skipped '?//; s/'$//" |
  sort | uniq -c | sort -rn
e2e_log "PASS"
