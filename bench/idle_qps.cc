// Holds N connected RC queue pairs open and idle for a while, so a benchmark can measure the
// router's CPU use and memory while nothing happens. Links Debian's libibverbs; run with ours
// injected.
//
//   wharf-idle-qps <qps> <seconds>
//       N QPs connected in pairs to each other (one router).
//   wharf-idle-qps <qps> <seconds> <dir> a|b [used]
//       N QPs connected one to one to the N QPs of another process (side a and side b, each
//       on its own router: QPs between hosts), the two exchanging LIDs and QPNs through files
//       in <dir>. `used`: every QP first does one RDMA WRITE of 0 bytes, so what a QP keeps
//       after it has worked is counted too.
// Prints "ready" once every QP is in RTS (and has worked).
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "rc_qp.h"

namespace {

// Writes this side's LID and QPNs to dir/side, then waits (up to 60 s) for the other side's.
bool exchange(const std::string& dir, const std::string& side, uint16_t lid,
              const std::vector<ibv_qp*>& qps, uint16_t* peer_lid, std::vector<uint32_t>* peer) {
  {
    std::ofstream out(dir + "/" + side + ".tmp");
    out << lid;
    for (ibv_qp* qp : qps) out << ' ' << qp->qp_num;
    out << '\n';
  }
  if (rename((dir + "/" + side + ".tmp").c_str(), (dir + "/" + side).c_str()) != 0) return false;
  const std::string other = dir + "/" + (side == "a" ? "b" : "a");
  for (int i = 0; i < 6000; ++i, usleep(10000)) {
    std::ifstream in(other);
    if (!in) continue;
    in >> *peer_lid;
    uint32_t qpn;
    while (in >> qpn) peer->push_back(qpn);
    return peer->size() == qps.size();
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 5 && argc != 6) {
    fprintf(stderr, "usage: %s <qps> <seconds> [<dir> a|b [used]]\n", argv[0]);
    return 2;
  }
  const bool paired = argc == 3;
  const int n = paired ? atoi(argv[1]) & ~1 : atoi(argv[1]);
  const int seconds = atoi(argv[2]);
  const bool used = argc == 6 && strcmp(argv[5], "used") == 0;
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
  if (paired) {
    for (int i = 0; i < n; i += 2) {
      if (rc_qp_to_rts(qps[i], qps[i + 1]->qp_num, port.lid, 14) != nullptr ||
          rc_qp_to_rts(qps[i + 1], qps[i]->qp_num, port.lid, 14) != nullptr)
        return 1;
    }
  } else {
    uint16_t peer_lid = 0;
    std::vector<uint32_t> peer;
    if (!exchange(argv[3], argv[4], port.lid, qps, &peer_lid, &peer)) {
      fprintf(stderr, "no QPNs from the other side\n");
      return 1;
    }
    for (int i = 0; i < n; ++i)
      if (rc_qp_to_rts(qps[i], peer[i], peer_lid, 14) != nullptr) return 1;
    if (used) {
      sleep(1);  // the other side's QPs reach RTR meanwhile
      for (ibv_qp* qp : qps) {
        ibv_send_wr wr{};
        ibv_send_wr* bad = nullptr;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        if (ibv_post_send(qp, &wr, &bad) != 0) return 1;
      }
      for (int done = 0; done < n;) {
        ibv_wc wc;
        const int got = ibv_poll_cq(cq, 1, &wc);
        if (got < 0 || (got == 1 && wc.status != IBV_WC_SUCCESS)) return 1;
        done += got;
      }
    }
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
