#include "engine.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace wharf::scala {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kGrhBytes = 40;  // a UD receive starts with the GRH (IBA 11.4.1.2)
constexpr uint32_t kQkey = 0x5343414c;
constexpr int kMaxRdAtomic = 16;
// At most this many latencies a thread keeps per point: about 3 s at 1 M work requests/s.
constexpr size_t kMaxLatencies = 4u << 20;
constexpr int kPollBatch = 32;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

std::string errno_text(const char* what) { return std::string(what) + ": " + strerror(errno); }
// Verbs that return their error (ibv_post_*) rather than set errno.
std::string error_text(const char* what, int err) {
  return std::string(what) + ": " + strerror(err);
}

}  // namespace

bool is_router_socket(const std::string& endpoint) {
  struct stat st {};
  return stat(endpoint.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// One side's open device.
struct Engine::Device {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_device_attr attr{};
  ibv_port_attr port{};
  ibv_gid gid{};

  ~Device() {
    if (ctx != nullptr) ibv_close_device(ctx);
  }
};

namespace {

// Opens the first device (a router's wharf0) or the one named.
std::unique_ptr<Engine::Device> open_device(const std::string& endpoint, std::string* error) {
  const bool router = is_router_socket(endpoint);
  if (router) setenv("WHARF_ROUTER", endpoint.c_str(), 1);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    *error = router ? "no device at router " + endpoint +
                          " (wharf-scala runs with Wharf's libibverbs: see docs/OPERATIONS.md)"
                    : "no RDMA devices";
    return nullptr;
  }
  ibv_device* chosen = router ? list[0] : nullptr;
  for (int i = 0; !router && i < n; ++i)
    if (endpoint == ibv_get_device_name(list[i])) chosen = list[i];
  auto d = std::make_unique<Engine::Device>();
  if (chosen != nullptr) {
    d->name = ibv_get_device_name(chosen);
    if (router) d->name += " (router " + endpoint + ")";
    d->ctx = ibv_open_device(chosen);
  }
  ibv_free_device_list(list);
  if (chosen == nullptr) {
    *error = "no device " + endpoint;
    return nullptr;
  }
  if (d->ctx == nullptr || ibv_query_device(d->ctx, &d->attr) != 0 ||
      ibv_query_port(d->ctx, 1, &d->port) != 0 || ibv_query_gid(d->ctx, 1, 0, &d->gid) != 0) {
    *error = errno_text(("opening " + endpoint).c_str());
    return nullptr;
  }
  return d;
}

// What one side builds for a point. Its QPs go first (destroy_qps, both sides' before either
// side's memory), so that no work in flight lands in memory about to be freed.
struct SideObjects {
  Engine::Device* dev = nullptr;
  ibv_pd* pd = nullptr;
  std::vector<uint8_t*> blocks;  // mrs blocks of mr_size bytes
  std::vector<ibv_mr*> mrs;
  std::vector<uint8_t> grh;  // where UD receives put their GRHs
  ibv_mr* grh_mr = nullptr;
  std::vector<ibv_comp_channel*> channels;  // per thread, with RunOptions::events
  std::vector<ibv_cq*> cqs;
  std::vector<ibv_srq*> srqs;  // per thread, or empty
  std::vector<ibv_qp*> qps;
  std::vector<ibv_ah*> ahs;
  // The match-action rules (PointSpec::rules) and the RAW_PACKET QPs that hold them.
  ibv_cq* rule_cq = nullptr;
  std::vector<ibv_qp*> rule_qps;
  std::vector<ibv_flow*> rules;

  void destroy_qps() {
    for (ibv_qp* q : qps) ibv_destroy_qp(q);
    qps.clear();
  }
  void destroy() {
    destroy_qps();
    for (ibv_flow* f : rules) ibv_destroy_flow(f);  // a QP's rules go before it
    for (ibv_qp* q : rule_qps) ibv_destroy_qp(q);
    if (rule_cq != nullptr) ibv_destroy_cq(rule_cq);
    for (ibv_ah* a : ahs) ibv_destroy_ah(a);
    for (ibv_srq* s : srqs) ibv_destroy_srq(s);
    for (ibv_cq* c : cqs) ibv_destroy_cq(c);
    for (ibv_comp_channel* c : channels) ibv_destroy_comp_channel(c);
    for (ibv_mr* m : mrs) ibv_dereg_mr(m);
    if (grh_mr != nullptr) ibv_dereg_mr(grh_mr);
    for (uint8_t* b : blocks) free(b);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    *this = SideObjects{};
  }
};

// The byte that work request number k of a flow uses in side s's memory: the registrations
// take turns, and within one the offset walks the block in message-sized steps, so the flows
// together touch all of the registered memory (the working set the memory dimensions set).
struct Place {
  uint64_t addr;
  uint32_t key_l, key_r;
};
Place place(const SideObjects& s, const PointSpec& p, uint64_t k) {
  const size_t mr = k % s.mrs.size();
  const uint64_t slots = std::max<uint64_t>(1, p.mr_size / std::max<uint32_t>(p.size, 8));
  const uint64_t offset = ((k / s.mrs.size()) % slots) * std::max<uint32_t>(p.size, 8);
  return {reinterpret_cast<uint64_t>(s.blocks[mr]) + offset, s.mrs[mr]->lkey, s.mrs[mr]->rkey};
}

struct Flow {
  SideObjects* req = nullptr;  // the requester's side
  SideObjects* rsp = nullptr;
  ibv_qp* qp_req = nullptr;
  ibv_qp* qp_rsp = nullptr;
  ibv_ah* ah = nullptr;  // UD: to qp_rsp
  ibv_srq* srq = nullptr;
  uint64_t cursor = 0;
  std::vector<uint64_t> posted_ns;  // per in-flight slot
};

// wr_id: bit 63 a receive, bits 32..62 the flow, 0..31 the slot.
constexpr uint64_t kRecvBit = 1ULL << 63;
uint64_t wr_id(size_t flow, uint32_t slot, bool recv) {
  return (recv ? kRecvBit : 0) | (static_cast<uint64_t>(flow) << 32) | slot;
}

ibv_wr_opcode wr_opcode(Opcode op) {
  switch (op) {
    case Opcode::kSend: return IBV_WR_SEND;
    case Opcode::kWrite: return IBV_WR_RDMA_WRITE;
    case Opcode::kRead: return IBV_WR_RDMA_READ;
    case Opcode::kAtomic: return IBV_WR_ATOMIC_FETCH_AND_ADD;
  }
  return IBV_WR_SEND;
}

uint32_t payload(const PointSpec& p) { return p.opcode == Opcode::kAtomic ? 8 : p.size; }

int post_send(Flow& f, size_t flow, uint32_t slot, const PointSpec& p) {
  const uint64_t k = f.cursor++;
  const Place mine = place(*f.req, p, k);
  const Place theirs = place(*f.rsp, p, k + flow);  // flows start at different places
  ibv_sge sge{mine.addr, payload(p), mine.key_l};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id(flow, slot, false);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = wr_opcode(p.opcode);
  wr.send_flags = IBV_SEND_SIGNALED | (p.inline_data ? IBV_SEND_INLINE : 0);
  if (p.opcode == Opcode::kAtomic) {
    wr.wr.atomic.remote_addr = theirs.addr;
    wr.wr.atomic.rkey = theirs.key_r;
    wr.wr.atomic.compare_add = 1;
  } else if (p.qp_type == IBV_QPT_UD) {
    wr.wr.ud.ah = f.ah;
    wr.wr.ud.remote_qpn = f.qp_rsp->qp_num;
    wr.wr.ud.remote_qkey = kQkey;
  } else {
    wr.wr.rdma.remote_addr = theirs.addr;
    wr.wr.rdma.rkey = theirs.key_r;
  }
  f.posted_ns[slot] = now_ns();
  return ibv_post_send(f.qp_req, &wr, &bad);
}

int post_recv(Flow& f, size_t flow, const PointSpec& p) {
  const Place where = place(*f.rsp, p, f.cursor + flow);
  ibv_sge sge[2];
  int n = 0;
  if (p.qp_type == IBV_QPT_UD)
    sge[n++] = {reinterpret_cast<uint64_t>(f.rsp->grh.data()), kGrhBytes, f.rsp->grh_mr->lkey};
  sge[n++] = {where.addr, p.size, where.key_l};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id(flow, 0, true);
  wr.sg_list = sge;
  wr.num_sge = n;
  return f.srq != nullptr ? ibv_post_srq_recv(f.srq, &wr, &bad)
                          : ibv_post_recv(f.qp_rsp, &wr, &bad);
}

// Moves qp (on device `self`) to RTS facing QP `dest` on device `peer`, as the QP type needs,
// within both devices' limits.
const char* connect_qp(ibv_qp* qp, ibv_qp_type type, uint32_t dest, const Engine::Device& self,
                       const Engine::Device& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (type == IBV_QPT_UD) {
    a.qkey = kQkey;
    mask |= IBV_QP_QKEY;
  } else {
    // UC has no READ or atomics (IBTA 9.7.4): only RC QPs allow them.
    a.qp_access_flags =
        IBV_ACCESS_REMOTE_WRITE |
        (type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (ibv_modify_qp(qp, &a, mask) != 0) return "INIT";
  a = {};
  a.qp_state = IBV_QPS_RTR;
  mask = IBV_QP_STATE;
  if (type != IBV_QPT_UD) {
    a.path_mtu = std::min({IBV_MTU_4096, self.port.active_mtu, peer.port.active_mtu});
    a.dest_qp_num = dest;
    a.ah_attr.port_num = 1;
    a.ah_attr.dlid = peer.port.lid;
    if (peer.port.link_layer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = peer.gid;
      a.ah_attr.grh.hop_limit = 64;
    }
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (type == IBV_QPT_RC) {
      a.max_dest_rd_atomic =
          static_cast<uint8_t>(std::min(kMaxRdAtomic, std::max(1, self.attr.max_qp_rd_atom)));
      a.min_rnr_timer = 12;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  if (ibv_modify_qp(qp, &a, mask) != 0) return "RTR";
  a = {};
  a.qp_state = IBV_QPS_RTS;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (type == IBV_QPT_RC) {
    a.timeout = 18;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic =
        static_cast<uint8_t>(std::min(kMaxRdAtomic, std::max(1, self.attr.max_qp_init_rd_atom)));
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return ibv_modify_qp(qp, &a, mask) != 0 ? "RTS" : nullptr;
}

// A flow-steering rule as ibv_create_flow takes it: Ethernet, IPv4 and one UDP port.
struct UdpRule {
  ibv_flow_attr attr{};
  ibv_flow_spec_eth eth{};
  ibv_flow_spec_ipv4 ip{};
  ibv_flow_spec_tcp_udp udp{};
};

UdpRule udp_rule(uint16_t port) {
  UdpRule r;
  r.attr.type = IBV_FLOW_ATTR_NORMAL;
  r.attr.size = sizeof(r);
  r.attr.num_of_specs = 3;
  r.attr.port = 1;
  r.eth.type = IBV_FLOW_SPEC_ETH;
  r.eth.size = sizeof(r.eth);
  r.ip.type = IBV_FLOW_SPEC_IPV4;
  r.ip.size = sizeof(r.ip);
  r.udp.type = IBV_FLOW_SPEC_UDP;
  r.udp.size = sizeof(r.udp);
  r.udp.val.dst_port = htons(port);
  r.udp.mask.dst_port = 0xffff;
  return r;
}

// A RAW_PACKET QP in INIT on CQ cq, to hold rules; nullptr with errno set on failure.
ibv_qp* rule_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RAW_PACKET;
  init.cap.max_send_wr = init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (qp == nullptr) return nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT) != 0) {
    const int err = errno;
    ibv_destroy_qp(qp);
    errno = err;
    return nullptr;
  }
  return qp;
}

// Installs `count` rules on side s, each on its own UDP port: a QP takes rules until the
// device has no room for more on it (ENOMEM), then the next QP takes them.
std::string install_rules(SideObjects& s, uint32_t count) {
  if (count == 0) return {};
  s.rule_cq = ibv_create_cq(s.dev->ctx, 1, nullptr, nullptr, 0);
  if (s.rule_cq == nullptr) return errno_text("ibv_create_cq");
  size_t on_last = 0;  // rules on the newest QP
  bool need_qp = true;
  while (s.rules.size() < count) {
    if (need_qp) {
      ibv_qp* qp = rule_qp(s.pd, s.rule_cq);
      if (qp == nullptr) return errno_text("a RAW_PACKET QP for the rules");
      s.rule_qps.push_back(qp);
      on_last = 0;
      need_qp = false;
    }
    UdpRule r = udp_rule(static_cast<uint16_t>(1 + s.rules.size() % 65535));
    ibv_flow* f = ibv_create_flow(s.rule_qps.back(), &r.attr);
    if (f == nullptr) {
      need_qp = errno == ENOMEM && on_last > 0;  // this QP is full
      if (need_qp) continue;
      return errno_text("ibv_create_flow");
    }
    s.rules.push_back(f);
    ++on_last;
  }
  return {};
}

// What a thread measured.
struct Tally {
  uint64_t bytes = 0, messages = 0;
  std::vector<uint64_t> latencies;  // ns
  std::string error;
};

class Point {
 public:
  Point(Engine::Device* local, Engine::Device* remote, const PointSpec& spec,
        const RunOptions& opts)
      : spec_(spec), opts_(opts) {
    sides_[0].dev = local;
    sides_[1].dev = remote;
  }
  ~Point() {
    // Every QP of both sides first: nothing is then in flight towards memory freed next.
    for (SideObjects& s : sides_) s.destroy_qps();
    for (SideObjects& s : sides_) s.destroy();
  }

  std::string build();
  PointResult run();

 private:
  std::string build_side(SideObjects& s);
  std::string build_flow(size_t i, bool forward);
  void drive(uint32_t thread, uint64_t warm_until, uint64_t warm_cap, Tally* tally);
  void wait_for_events(uint32_t thread, uint64_t until);
  // A thread whose flows have all completed a work request (or whose warm-up ran out) says so;
  // the last one starts the measured interval.
  void warmed_up(uint64_t now);
  // The CQ a QP on side s of flow i completes on.
  ibv_cq* cq_for(const SideObjects& s, size_t i) const {
    return spec_.shared_cq ? s.cqs[i % opts_.threads] : s.cqs[i];
  }
  bool counts_at_receiver() const { return spec_.qp_type == IBV_QPT_UD; }

  PointSpec spec_;
  RunOptions opts_;
  SideObjects sides_[2];
  std::vector<Flow> flows_;
  std::atomic<bool> failed_{false};
  std::atomic<uint32_t> warm_threads_{0};
  std::atomic<uint64_t> measure_from_{UINT64_MAX};  // set by warmed_up
};

std::string Point::build_side(SideObjects& s) {
  s.pd = ibv_alloc_pd(s.dev->ctx);
  if (s.pd == nullptr) return errno_text("ibv_alloc_pd");
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  for (uint32_t i = 0; i < spec_.mrs; ++i) {
    void* b = nullptr;
    if (posix_memalign(&b, 4096, spec_.mr_size) != 0) return "out of memory for the MRs";
    memset(b, 0, spec_.mr_size);
    s.blocks.push_back(static_cast<uint8_t*>(b));
    ibv_mr* mr = ibv_reg_mr(s.pd, b, spec_.mr_size, access);
    if (mr == nullptr) return errno_text("ibv_reg_mr");
    s.mrs.push_back(mr);
  }
  s.grh.assign(kGrhBytes, 0);
  s.grh_mr = ibv_reg_mr(s.pd, s.grh.data(), s.grh.size(), IBV_ACCESS_LOCAL_WRITE);
  if (s.grh_mr == nullptr) return errno_text("ibv_reg_mr");
  const size_t flows = size_t{spec_.ql} + spec_.qr;
  const size_t ncq = spec_.shared_cq ? opts_.threads : flows;
  const size_t per_thread = (flows + opts_.threads - 1) / opts_.threads;
  // A CQ takes the completions of its QPs' sends and receives: depth each way per QP, all of a
  // thread's QPs on a shared one. More than the device takes would overrun it: the point fails.
  const size_t per_cq = 2 * size_t{opts_.depth} * (spec_.shared_cq ? per_thread : 1) + 16;
  if (per_cq > static_cast<size_t>(s.dev->attr.max_cqe))
    return "a CQ would need " + std::to_string(per_cq) + " entries, " + s.dev->name + " has " +
           std::to_string(s.dev->attr.max_cqe) + " (fewer QPs per thread, or --depth)";
  const size_t per_srq = size_t{opts_.depth} * per_thread + 16;
  if (spec_.srq && per_srq > static_cast<size_t>(s.dev->attr.max_srq_wr))
    return "an SRQ would need " + std::to_string(per_srq) + " receives, " + s.dev->name +
           " takes " + std::to_string(s.dev->attr.max_srq_wr);
  for (uint32_t t = 0; opts_.events && t < opts_.threads; ++t) {
    ibv_comp_channel* ch = ibv_create_comp_channel(s.dev->ctx);
    if (ch == nullptr) return errno_text("ibv_create_comp_channel");
    s.channels.push_back(ch);
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  }
  for (size_t i = 0; i < ncq; ++i) {
    ibv_comp_channel* ch = opts_.events ? s.channels[i % opts_.threads] : nullptr;
    ibv_cq* cq = ibv_create_cq(s.dev->ctx, static_cast<int>(per_cq), nullptr, ch, 0);
    if (cq == nullptr) return errno_text("ibv_create_cq");
    s.cqs.push_back(cq);
  }
  for (uint32_t t = 0; spec_.srq && t < opts_.threads; ++t) {
    ibv_srq_init_attr init{};
    init.attr.max_wr = static_cast<uint32_t>(per_srq);
    init.attr.max_sge = 2;
    ibv_srq* srq = ibv_create_srq(s.pd, &init);
    if (srq == nullptr) return errno_text("ibv_create_srq");
    s.srqs.push_back(srq);
  }
  return install_rules(s, spec_.rules);
}

std::string Point::build_flow(size_t i, bool forward) {
  Flow f;
  f.req = &sides_[forward ? 0 : 1];
  f.rsp = &sides_[forward ? 1 : 0];
  f.posted_ns.assign(opts_.depth, 0);
  const uint32_t thread = static_cast<uint32_t>(i % opts_.threads);
  if (spec_.srq) f.srq = f.rsp->srqs[thread];
  auto make_qp = [&](SideObjects& s, bool responder) -> ibv_qp* {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_for(s, i);
    init.qp_type = spec_.qp_type;
    init.srq = responder ? f.srq : nullptr;
    init.cap.max_send_wr = opts_.depth;
    init.cap.max_recv_wr = init.srq != nullptr ? 0 : opts_.depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 2;
    init.cap.max_inline_data = spec_.inline_data ? spec_.size : 0;
    ibv_qp* qp = ibv_create_qp(s.pd, &init);
    if (qp != nullptr) s.qps.push_back(qp);
    return qp;
  };
  f.qp_req = make_qp(*f.req, false);
  f.qp_rsp = make_qp(*f.rsp, true);
  if (f.qp_req == nullptr || f.qp_rsp == nullptr) return errno_text("ibv_create_qp");
  if (const char* step =
          connect_qp(f.qp_req, spec_.qp_type, f.qp_rsp->qp_num, *f.req->dev, *f.rsp->dev))
    return errno_text((std::string("ibv_modify_qp to ") + step).c_str());
  if (const char* step =
          connect_qp(f.qp_rsp, spec_.qp_type, f.qp_req->qp_num, *f.rsp->dev, *f.req->dev))
    return errno_text((std::string("ibv_modify_qp to ") + step).c_str());
  if (spec_.qp_type == IBV_QPT_UD) {
    ibv_ah_attr ah{};
    ah.port_num = 1;
    ah.dlid = f.rsp->dev->port.lid;
    if (f.rsp->dev->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
      ah.is_global = 1;
      ah.grh.dgid = f.rsp->dev->gid;
      ah.grh.hop_limit = 64;
    }
    f.ah = ibv_create_ah(f.req->pd, &ah);
    if (f.ah == nullptr) return errno_text("ibv_create_ah");
    f.req->ahs.push_back(f.ah);
  }
  flows_.push_back(std::move(f));
  return {};
}

std::string Point::build() {
  for (SideObjects& s : sides_)
    if (std::string e = build_side(s); !e.empty()) return e;
  flows_.reserve(size_t{spec_.ql} + spec_.qr);
  for (uint32_t i = 0; i < spec_.ql + spec_.qr; ++i)
    if (std::string e = build_flow(i, i < spec_.ql); !e.empty()) return e;
  if (spec_.opcode == Opcode::kSend)
    for (size_t i = 0; i < flows_.size(); ++i)
      for (uint32_t k = 0; k < opts_.depth; ++k)
        if (const int err = post_recv(flows_[i], i, spec_); err != 0)
          return error_text("ibv_post_recv", err);
  return {};
}

void Point::warmed_up(uint64_t now) {
  if (warm_threads_.fetch_add(1) + 1 == opts_.threads) measure_from_.store(now);
}

// One thread's loop: keeps its flows' windows full and takes their completions. It is warm
// once every flow of its has completed a work request, and not before warm_until (nor after
// warm_cap: a flow that never completes is the measurement's business, not the warm-up's);
// the interval measured starts when every thread is warm and lasts measure_s. (With
// thousands of QPs the first round alone takes longer than a fixed warm-up: the QPs' first
// packets set up state in the routers.)
void Point::drive(uint32_t thread, uint64_t warm_until, uint64_t warm_cap, Tally* tally) {
  std::vector<ibv_cq*> cqs;
  for (SideObjects& s : sides_) {
    for (size_t i = 0; i < s.cqs.size(); ++i)
      if (i % opts_.threads == thread) cqs.push_back(s.cqs[i]);
  }
  // The first failure ends every thread's loop; the point reports it.
  auto fail = [&](std::string why) {
    tally->error = std::move(why);
    failed_ = true;
  };
  for (size_t i = thread; i < flows_.size(); i += opts_.threads)
    for (uint32_t slot = 0; slot < opts_.depth; ++slot)
      if (const int err = post_send(flows_[i], i, slot, spec_); err != 0)
        return fail(error_text("ibv_post_send", err));
  std::vector<bool> completed(flows_.size());  // indexed by flow; this thread's only
  size_t mine = 0, warm = 0;
  for (size_t i = thread; i < flows_.size(); i += opts_.threads) ++mine;
  bool is_warm = false;
  const uint64_t measure_ns = static_cast<uint64_t>(opts_.measure_s * 1e9);
  ibv_wc wc[kPollBatch];
  bool armed = false;
  for (uint64_t now = now_ns(); !failed_; now = now_ns()) {
    if (!is_warm && ((warm == mine && now >= warm_until) || now >= warm_cap)) {
      is_warm = true;
      warmed_up(now);
    }
    const uint64_t from = measure_from_.load(std::memory_order_relaxed);
    if (from != UINT64_MAX && now >= from + measure_ns) break;
    const bool counting = now >= from;
    int seen = 0;
    for (ibv_cq* cq : cqs) {
      const int n = ibv_poll_cq(cq, kPollBatch, wc);
      if (n < 0) return fail("ibv_poll_cq failed");
      seen += n;
      for (int k = 0; k < n; ++k) {
        const ibv_wc& c = wc[k];
        const size_t i = (c.wr_id & ~kRecvBit) >> 32;
        if (c.status != IBV_WC_SUCCESS || i >= flows_.size())
          return fail(std::string("completion: ") + ibv_wc_status_str(c.status));
        Flow& f = flows_[i];
        if (c.wr_id & kRecvBit) {
          if (counting && counts_at_receiver()) {
            tally->bytes += spec_.size;
            ++tally->messages;
          }
          if (const int err = post_recv(f, i, spec_); err != 0)
            return fail(error_text("ibv_post_recv", err));
          continue;
        }
        const uint32_t slot = static_cast<uint32_t>(c.wr_id & 0xffffffffu);
        if (!completed[i]) {
          completed[i] = true;
          ++warm;
        }
        if (counting) {
          if (tally->latencies.size() < kMaxLatencies)
            tally->latencies.push_back(now - f.posted_ns[slot]);
          if (!counts_at_receiver()) {
            tally->bytes += payload(spec_);
            ++tally->messages;
          }
        }
        if (const int err = post_send(f, i, slot, spec_); err != 0)
          return fail(error_text("ibv_post_send", err));
      }
    }
    if (seen > 0 || !opts_.events) {
      armed = false;
      continue;
    }
    // Nothing completed: arm every CQ, and sleep once they are armed and still empty (a
    // completion between the last poll and the arming is found by the next poll).
    if (!armed) {
      for (ibv_cq* cq : cqs) ibv_req_notify_cq(cq, 0);
      armed = true;
      continue;
    }
    const uint64_t from_now = measure_from_.load(std::memory_order_relaxed);
    wait_for_events(thread, from_now == UINT64_MAX ? warm_cap : from_now + measure_ns);
    armed = false;
  }
}

void Point::wait_for_events(uint32_t thread, uint64_t until) {
  pollfd fds[2];
  for (int s = 0; s < 2; ++s) fds[s] = {sides_[s].channels[thread]->fd, POLLIN, 0};
  const uint64_t now = now_ns();
  if (now >= until) return;
  const int timeout_ms = static_cast<int>(std::min<uint64_t>((until - now) / 1'000'000 + 1, 10));
  if (poll(fds, 2, timeout_ms) <= 0) return;
  for (int s = 0; s < 2; ++s) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    while (ibv_get_cq_event(sides_[s].channels[thread], &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  }
}

double percentile(std::vector<uint64_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]);
}

PointResult Point::run() {
  PointResult r;
  const uint64_t start = now_ns();
  const uint64_t warm_until = start + static_cast<uint64_t>(opts_.warmup_s * 1e9);
  const uint64_t warm_cap = start + static_cast<uint64_t>(opts_.warmup_max_s * 1e9);
  std::vector<Tally> tallies(opts_.threads);
  for (Tally& t : tallies) t.latencies.reserve(1u << 16);
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t < opts_.threads; ++t)
    threads.emplace_back(&Point::drive, this, t, warm_until, warm_cap, &tallies[t]);
  drive(0, warm_until, warm_cap, &tallies[0]);
  for (std::thread& t : threads) t.join();
  std::vector<uint64_t> lat;
  uint64_t bytes = 0, messages = 0;
  for (Tally& t : tallies) {
    if (!t.error.empty() && r.error.empty()) r.error = t.error;
    bytes += t.bytes;
    messages += t.messages;
    lat.insert(lat.end(), t.latencies.begin(), t.latencies.end());
  }
  if (!r.error.empty()) return r;
  if (messages == 0) {
    r.error = "no work completed in the measured interval";
    return r;
  }
  r.ok = true;
  r.bw_gbps = static_cast<double>(bytes) * 8 / opts_.measure_s / 1e9;
  r.mrate_mps = static_cast<double>(messages) / opts_.measure_s / 1e6;
  r.lat_p50_us = percentile(lat, 0.50) / 1e3;
  r.lat_p99_us = percentile(lat, 0.99) / 1e3;
  return r;
}

// Whether device d can hold a flow-steering rule: "" or why not.
std::string probe_rules(const Engine::Device& d) {
  SideObjects s;
  s.dev = const_cast<Engine::Device*>(&d);
  s.pd = ibv_alloc_pd(d.ctx);
  std::string why = s.pd == nullptr ? errno_text("ibv_alloc_pd") : install_rules(s, 1);
  s.destroy();
  return why.empty() ? why : d.name + ": " + why;
}

}  // namespace

std::unique_ptr<Engine> Engine::open(const std::string& local, const std::string& remote,
                                     std::string* error) {
  std::unique_ptr<Engine> e(new Engine);
  e->local_ = open_device(local, error);
  if (e->local_ == nullptr) return nullptr;
  e->remote_ = open_device(remote, error);
  if (e->remote_ == nullptr) return nullptr;
  if (!is_router_socket(local) || !is_router_socket(remote))
    e->fixed_.push_back({"networks", "tenant networks are Wharf routers' (two devices given)"});
  else if (geteuid() != 0)
    e->fixed_.push_back({"networks", "registering tenant networks needs root"});
  if (e->fixed_.empty()) {
    e->networks_.push_back(std::make_unique<TenantNetworks>(local, 0, &e->namespaces_));
    if (remote != local)
      e->networks_.push_back(std::make_unique<TenantNetworks>(remote, 1, &e->namespaces_));
  }
  std::string why = probe_rules(*e->local_);
  if (why.empty()) why = probe_rules(*e->remote_);
  if (!why.empty()) e->fixed_.push_back({"rules", "no flow steering: " + why});
  return e;
}

Engine::~Engine() = default;

const std::string& Engine::local_name() const { return local_->name; }
const std::string& Engine::remote_name() const { return remote_->name; }
uint32_t Engine::max_qp_wr() const {
  return static_cast<uint32_t>(std::min(local_->attr.max_qp_wr, remote_->attr.max_qp_wr));
}

PointResult Engine::run(const PointSpec& spec, const RunOptions& opts) {
  if (spec.networks > 1 && networks_.empty()) {
    PointResult r;
    r.error = "networks > 1: tenant networks need two Wharf routers and root";
    return r;
  }
  for (auto& n : networks_) {
    if (std::string error = n->hold(spec.networks - 1); !error.empty()) {
      PointResult r;
      r.error = std::move(error);
      return r;
    }
  }
  Point point(local_.get(), remote_.get(), spec, opts);
  if (std::string error = point.build(); !error.empty()) {
    PointResult r;
    r.error = std::move(error);
    return r;
  }
  return point.run();
}

}  // namespace wharf::scala
