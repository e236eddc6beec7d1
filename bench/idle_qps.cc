// Holds N connected RC queue pairs open and idle for a while, so a benchmark can measure the
// router's CPU use while nothing happens. Usage: wharf-idle-qps <qps> <seconds>
// Prints "ready" once every QP is in RTS. Links Debian's libibverbs; run with ours injected.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rc_qp.h"

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
    if (rc_qp_to_rts(qps[i], qps[i + 1]->qp_num, port.lid, 14) != nullptr ||
        rc_qp_to_rts(qps[i + 1], qps[i]->qp_num, port.lid, 14) != nullptr)
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
