// Drives N concurrent RC flows from one router to another and reports what each carried:
// the aggregate throughput, the slowest and fastest flow and Jain's fairness index. Used by
// bench/hosts.sh between two wharf-lab hosts (side A on one router, side B on the other).
//
//   wharf-flows --from SOCK --to SOCK [--qps N] [--size BYTES] [--seconds S] [--op write|send]
//               [--stalled K]
//
// Every flow is a QP pair A -> B that keeps a window of work requests in flight (RDMA WRITE,
// or SEND with receives reposted as they complete); the window shrinks with N so that about
// 64 MiB are in flight in all (at most 128 work requests per flow, at least one). --stalled K
// adds K more SEND flows whose receiver never posts a receive (they live on RNR NAKs and
// rnr_retry = 7, i.e. forever): they must not slow the others. Counting starts after one
// second of warm-up. Output, one line:
//   flows=N size=B seconds=S aggregate_gbps=X min_flow_gbps=Y max_flow_gbps=Z jain=J
// Links Debian's libibverbs; run it with ours injected (LD_PRELOAD).
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rc_qp.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string from, to;
  int qps = 1;
  uint32_t size = 65536;
  double seconds = 5;
  bool send = false;
  int stalled = 0;
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_port_attr port{};
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
};

struct Flow {
  ibv_qp* qa = nullptr;  // requester, on side A
  ibv_qp* qb = nullptr;  // responder, on side B
  int in_flight = 0;
  uint64_t bytes = 0;  // completed inside the measured interval
  bool stalled = false;
};

[[noreturn]] void die(const char* what) {
  fprintf(stderr, "wharf-flows: %s: %s\n", what, strerror(errno));
  exit(1);
}

Side open_side(const std::string& router, int cqe, size_t buf_len) {
  setenv("WHARF_ROUTER", router.c_str(), 1);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) die(("no device at " + router).c_str());
  Side s;
  s.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (s.ctx == nullptr) die("ibv_open_device");
  if (ibv_query_port(s.ctx, 1, &s.port) != 0) die("ibv_query_port");
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, cqe, nullptr, nullptr, 0);
  if (s.pd == nullptr || s.cq == nullptr) die("ibv_alloc_pd/ibv_create_cq");
  s.buf.assign(buf_len, 0x5a);
  s.mr = ibv_reg_mr(s.pd, s.buf.data(), buf_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s.mr == nullptr) die("ibv_reg_mr");
  return s;
}

ibv_qp* create_qp(Side& s, int depth) {
  ibv_qp_init_attr init{};
  init.send_cq = s.cq;
  init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {static_cast<uint32_t>(depth), static_cast<uint32_t>(depth), 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(s.pd, &init);
  if (qp == nullptr) die("ibv_create_qp");
  return qp;
}

void connect(ibv_qp* qp, uint32_t dest_qpn, uint16_t dlid) {
  if (const char* failed = rc_qp_to_rts(qp, dest_qpn, dlid, 18)) die(failed);
}

void post(Flow& f, Side& a, Side& b, uint32_t size, bool send, uint64_t id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(a.buf.data()), size, a.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(b.buf.data());
  wr.wr.rdma.rkey = b.mr->rkey;
  if (ibv_post_send(f.qa, &wr, &bad) != 0) die("ibv_post_send");
  ++f.in_flight;
}

void post_recv(Flow& f, Side& b, uint32_t size, uint64_t id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(b.buf.data()), size, b.mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(f.qb, &wr, &bad) != 0) die("ibv_post_recv");
}

// A completion naming no flow: the library or router handed back a wr_id we never posted.
int bad_completion(const ibv_wc& wc) {
  fprintf(stderr, "wharf-flows: completion with unknown wr_id %#lx (qp %#x, opcode %d, %s)\n",
          static_cast<unsigned long>(wc.wr_id), wc.qp_num, wc.opcode, ibv_wc_status_str(wc.status));
  return 1;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) die(("missing value for " + k).c_str());
    std::string v = argv[++i];
    if (k == "--from") {
      o.from = v;
    } else if (k == "--to") {
      o.to = v;
    } else if (k == "--qps") {
      o.qps = std::stoi(v);
    } else if (k == "--size") {
      o.size = static_cast<uint32_t>(std::stoul(v));
    } else if (k == "--seconds") {
      o.seconds = std::stod(v);
    } else if (k == "--op") {
      if (v != "send" && v != "write") die("--op is write or send");
      o.send = v == "send";
    } else if (k == "--stalled") {
      o.stalled = std::stoi(v);
    } else {
      die(("unknown option " + k).c_str());
    }
  }
  if (o.from.empty() || o.to.empty() || o.qps < 1 || o.size == 0) die("bad options (see header)");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;  // every QP maps its rings from a memfd
  setrlimit(RLIMIT_NOFILE, &nofile);

  const int total = o.qps + o.stalled;
  const int depth =
      std::clamp<int>(static_cast<int>((64u << 20) / (uint64_t{o.size} * o.qps)), 1, 128);
  Side a = open_side(o.from, total * depth + 16, o.size);
  Side b = open_side(o.to, total * depth + 16, o.size);
  std::vector<Flow> flows(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {
    Flow& f = flows[static_cast<size_t>(i)];
    f.stalled = i >= o.qps;
    f.qa = create_qp(a, depth);
    f.qb = create_qp(b, depth);
    connect(f.qa, f.qb->qp_num, b.port.lid);
    connect(f.qb, f.qa->qp_num, a.port.lid);
    const bool send = o.send || f.stalled;
    if (send && !f.stalled)
      for (int k = 0; k < depth; ++k) post_recv(f, b, o.size, static_cast<uint64_t>(i));
    for (int k = 0; k < depth; ++k) post(f, a, b, o.size, send, static_cast<uint64_t>(i));
  }

  // For scripts that measure something else while the flows run (bench/hol.sh): registering
  // large buffers takes seconds.
  fprintf(stderr, "wharf-flows: running\n");
  const auto start = Clock::now();
  const auto counting = start + std::chrono::seconds(1);
  const auto end = counting + std::chrono::duration<double>(o.seconds);
  ibv_wc wc[64];
  for (auto now = start; now < end; now = Clock::now()) {
    const bool count = now >= counting;
    int n = ibv_poll_cq(a.cq, 64, wc);
    if (n < 0) die("ibv_poll_cq");
    for (int k = 0; k < n; ++k) {
      if (wc[k].wr_id >= flows.size()) return bad_completion(wc[k]);
      Flow& f = flows[wc[k].wr_id];
      if (wc[k].status != IBV_WC_SUCCESS) {
        fprintf(stderr, "wharf-flows: flow %lu: %s\n", static_cast<unsigned long>(wc[k].wr_id),
                ibv_wc_status_str(wc[k].status));
        return 1;
      }
      --f.in_flight;
      if (count) f.bytes += o.size;
      post(f, a, b, o.size, o.send || f.stalled, wc[k].wr_id);
    }
    int m = ibv_poll_cq(b.cq, 64, wc);
    if (m < 0) die("ibv_poll_cq");
    for (int k = 0; k < m; ++k) {
      if (wc[k].wr_id >= flows.size()) return bad_completion(wc[k]);
      if (wc[k].status != IBV_WC_SUCCESS) die("receive completion");
      post_recv(flows[wc[k].wr_id], b, o.size, wc[k].wr_id);
    }
  }

  double sum = 0, sum_sq = 0, lo = 1e300, hi = 0;
  for (const Flow& f : flows) {
    if (f.stalled) continue;
    const double gbps = static_cast<double>(f.bytes) * 8 / o.seconds / 1e9;
    sum += gbps;
    sum_sq += gbps * gbps;
    lo = std::min(lo, gbps);
    hi = std::max(hi, gbps);
  }
  const double jain = sum_sq > 0 ? sum * sum / (o.qps * sum_sq) : 0;
  printf(
      "flows=%d size=%u seconds=%.1f aggregate_gbps=%.3f min_flow_gbps=%.4f max_flow_gbps=%.4f "
      "jain=%.4f\n",
      o.qps, o.size, o.seconds, sum, lo, hi, jain);
  // Work is still in flight: the QPs go first, so nothing is written into the buffers once
  // they are freed (freeing registered memory with RDMA in flight corrupts the heap, here as
  // with any RNIC).
  for (Flow& f : flows) {
    ibv_destroy_qp(f.qa);
    ibv_destroy_qp(f.qb);
  }
  for (Side* s : {&a, &b}) {
    ibv_dereg_mr(s->mr);
    ibv_destroy_cq(s->cq);
    ibv_dealloc_pd(s->pd);
    ibv_close_device(s->ctx);
  }
  return 0;
}
