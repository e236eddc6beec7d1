// Measures what an application sees of a router restart (issue #23): one process, two verbs
// contexts (two router sessions, like two processes), an RC QP on each connected to the
// other, doing SENDs of 64 bytes one at a time, each waited for, for `seconds`. Prints every
// wait longer than 5 ms ("stall <start s> <length ms>", times from the start) and at the end
// "done <sends> <longest stall ms>"; exits 1 if a send or receive fails. Links Debian's
// libibverbs; run with ours injected (and WHARF_ROUTER: the sender's router). With
// `receiver_router`, the receiving context is opened on that router's socket (another host
// of a cluster), and both QPs use ACK timeout `ack_timeout` (default 14).
//
//   wharf-restart-stall <seconds> [<receiver_router> <ack_timeout>]
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "rc_qp.h"

namespace {

using Clock = std::chrono::steady_clock;

struct End {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64] = {};
  uint16_t lid = 0;
};

bool open_end(ibv_device* dev, End* e) {
  e->ctx = ibv_open_device(dev);
  if (e->ctx == nullptr) return false;
  e->pd = ibv_alloc_pd(e->ctx);
  e->cq = e->pd != nullptr ? ibv_create_cq(e->ctx, 16, nullptr, nullptr, 0) : nullptr;
  if (e->cq == nullptr) return false;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = e->cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {4, 4, 1, 1, 0};
  e->qp = ibv_create_qp(e->pd, &init);
  e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf), IBV_ACCESS_LOCAL_WRITE);
  ibv_port_attr port{};
  if (e->qp == nullptr || e->mr == nullptr || ibv_query_port(e->ctx, 1, &port) != 0) return false;
  e->lid = port.lid;
  return true;
}

int post_recv(End* e) {
  ibv_sge sge{reinterpret_cast<uint64_t>(e->buf), sizeof(e->buf), e->mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(e->qp, &wr, &bad);
}

int post_send(End* e) {
  ibv_sge sge{reinterpret_cast<uint64_t>(e->buf), sizeof(e->buf), e->mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  return ibv_post_send(e->qp, &wr, &bad);
}

// Polls cq until one completion (true if successful).
bool wait_one(ibv_cq* cq) {
  ibv_wc wc{};
  int n;
  while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
  }
  return n == 1 && wc.status == IBV_WC_SUCCESS;
}

double seconds_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "usage: %s <seconds> [<receiver_router> <ack_timeout>]\n", argv[0]);
    return 2;
  }
  const double seconds = atof(argv[1]);
  const auto ack_timeout = static_cast<uint8_t>(argc == 4 ? atoi(argv[3]) : 14);
  ibv_device** list = ibv_get_device_list(nullptr);
  End a, b;
  if (list == nullptr || list[0] == nullptr || !open_end(list[0], &a)) {
    fprintf(stderr, "cannot open wharf0 with a QP\n");
    return 1;
  }
  if (argc == 4) setenv("WHARF_ROUTER", argv[2], 1);  // read at each ibv_open_device
  if (!open_end(list[0], &b)) {
    fprintf(stderr, "cannot open wharf0 again with a QP\n");
    return 1;
  }
  const char* failed = rc_qp_to_rts(a.qp, b.qp->qp_num, b.lid, ack_timeout);
  if (failed == nullptr) failed = rc_qp_to_rts(b.qp, a.qp->qp_num, a.lid, ack_timeout);
  if (failed != nullptr) {
    fprintf(stderr, "modify to %s failed\n", failed);
    return 1;
  }
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last = t0;
  double longest_ms = 0;
  long sends = 0;
  while (seconds_since(t0, last) < seconds) {
    if (post_recv(&b) != 0 || post_send(&a) != 0 || !wait_one(a.cq) || !wait_one(b.cq)) {
      fprintf(stderr, "send %ld failed\n", sends);
      return 1;
    }
    const Clock::time_point now = Clock::now();
    const double gap_ms = std::chrono::duration<double, std::milli>(now - last).count();
    if (gap_ms > 5) printf("stall %.3f %.1f\n", seconds_since(t0, last), gap_ms);
    if (gap_ms > longest_ms) longest_ms = gap_ms;
    last = now;
    ++sends;
  }
  printf("done %ld %.1f\n", sends, longest_ms);
  return 0;
}
