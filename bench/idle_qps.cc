// Holds N connected RC queue pairs open and idle for a while, so a benchmark can measure the
// router's CPU use while nothing happens. Usage: wharf-idle-qps <qps> <seconds>
// Prints "ready" once every QP is in RTS. Links Debian's libibverbs; run with ours injected.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

bool to_rts(ibv_qp* qp, uint32_t dest_qpn, uint16_t dlid) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = dlid;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <qps> <seconds>\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]) & ~1;
  int seconds = atoi(argv[2]);
  ibv_device** list = ibv_get_device_list(nullptr);
  if (list == nullptr || list[0] == nullptr) return 1;
  ibv_context* ctx = ibv_open_device(list[0]);
  if (ctx == nullptr) return 1;
  ibv_port_attr port;
  ibv_query_port(ctx, 1, &port);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 2 * n + 1, nullptr, nullptr, 0);
  std::vector<ibv_qp*> qps;
  for (int i = 0; i < n; ++i) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap = {16, 16, 1, 1, 0};
    ibv_qp* qp = ibv_create_qp(pd, &init);
    if (qp == nullptr) return 1;
    qps.push_back(qp);
  }
  for (int i = 0; i < n; i += 2) {
    if (!to_rts(qps[i], qps[i + 1]->qp_num, port.lid) ||
        !to_rts(qps[i + 1], qps[i]->qp_num, port.lid))
      return 1;
  }
  printf("ready\n");
  fflush(stdout);
  sleep(static_cast<unsigned>(seconds));
  for (ibv_qp* qp : qps) ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
