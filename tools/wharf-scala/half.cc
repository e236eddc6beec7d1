#include "half.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/clock.h"

namespace wharf::scala {
namespace {

constexpr uint32_t kGrhBytes = 40;  // a UD receive starts with the GRH (IBA 11.4.1.2)
constexpr uint32_t kQkey = 0x5343414c;
constexpr int kMaxRdAtomic = 16;
// At most this many latencies the threads of a half keep per point, together: about 3 s at
// 1 M work requests/s.
constexpr size_t kMaxLatencies = 4u << 20;
constexpr int kPollBatch = 32;
// Receives a responder keeps posted per QP, as a multiple of the sender's window: a receive is
// posted again only once its completion is seen, and with the two sides in two processes the
// next SEND often arrives first; with a window's worth spare it finds a receive rather than
// an RNR NAK and its retry timer.
constexpr uint32_t kRecvWindows = 2;

std::string errno_text(const char* what) { return std::string(what) + ": " + strerror(errno); }
// Verbs that return their error (ibv_post_*) rather than set errno.
std::string error_text(const char* what, int err) {
  return std::string(what) + ": " + strerror(err);
}

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

// The byte that work request number k of a flow uses in a side's registrations: they take
// turns, and within one the offset walks the block in message-sized steps, so the flows
// together touch all of the registered memory (the working set the memory dimensions set).
struct Place {
  size_t mr;
  uint64_t offset;
};
Place place(size_t mrs, const PointSpec& p, uint64_t k) {
  const uint64_t step = std::max<uint32_t>(p.size, 8);
  const uint64_t slots = std::max<uint64_t>(1, p.mr_size / step);
  return {k % mrs, ((k / mrs) % slots) * step};
}

// Moves qp (on device `self`) to RTS facing QP `dest` of `peer`, as the QP type needs,
// within this device's limits.
const char* connect_qp(ibv_qp* qp, ibv_qp_type type, uint32_t dest, const Half::Device& self,
                       const HalfInfo& peer) {
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
    a.path_mtu = std::min({IBV_MTU_4096, self.port.active_mtu, static_cast<ibv_mtu>(peer.mtu)});
    a.dest_qp_num = dest;
    a.ah_attr.port_num = 1;
    a.ah_attr.dlid = peer.lid;
    if (peer.link_layer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid.data(), 16);
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

}  // namespace

// This half's end of one flow.
struct Half::Flow {
  ibv_qp* qp = nullptr;
  uint32_t peer_qpn = 0;
  ibv_ah* ah = nullptr;             // UD flows it sends: to the peer's QP
  ibv_srq* srq = nullptr;           // flows it answers, with an SRQ
  uint64_t cursor = 0;              // work requests posted (sends, or receives)
  std::vector<uint64_t> posted_ns;  // per in-flight slot, of flows it sends
  bool completed = false;           // a send of it has completed (warm-up)
};

void Meter::thread_warm(uint64_t now, bool start_when_warm) {
  if (warm_.fetch_add(1) + 1 == threads_ && start_when_warm) start(now);
}

Half::Half(const Device* dev, uint32_t side, const PointSpec& spec, const RunOptions& opts)
    : dev_(dev), side_(side), spec_(spec), opts_(opts) {}

Half::~Half() { destroy(); }

void Half::destroy_qps() {
  for (Flow& f : flows_) {
    if (f.qp != nullptr) ibv_destroy_qp(f.qp);
    f.qp = nullptr;
  }
}

void Half::destroy() {
  destroy_qps();
  for (ibv_flow* f : rules_) ibv_destroy_flow(f);  // a QP's rules go before it
  for (ibv_qp* q : rule_qps_) ibv_destroy_qp(q);
  if (rule_cq_ != nullptr) ibv_destroy_cq(rule_cq_);
  for (ibv_ah* a : ahs_) ibv_destroy_ah(a);
  for (ibv_srq* s : srqs_) ibv_destroy_srq(s);
  for (ibv_cq* c : cqs_) ibv_destroy_cq(c);
  for (ibv_comp_channel* c : channels_) ibv_destroy_comp_channel(c);
  for (ibv_mr* m : mrs_) ibv_dereg_mr(m);
  if (grh_mr_ != nullptr) ibv_dereg_mr(grh_mr_);
  for (uint8_t* b : blocks_) free(b);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  rules_.clear();
  rule_qps_.clear();
  rule_cq_ = nullptr;
  ahs_.clear();
  srqs_.clear();
  cqs_.clear();
  channels_.clear();
  mrs_.clear();
  grh_mr_ = nullptr;
  blocks_.clear();
  pd_ = nullptr;
  flows_.clear();
}

uint32_t Half::recv_window() const {
  // Within what a QP of the device takes (the sweep keeps depth itself within it).
  const auto most = static_cast<uint32_t>(std::max(dev_->attr.max_qp_wr, 1));
  return std::max(opts_.depth, std::min(kRecvWindows * opts_.depth, most));
}

ibv_cq* Half::cq_for(size_t flow) const {
  return spec_.shared_cq ? cqs_[flow % opts_.threads] : cqs_[flow];
}

// Installs spec_.rules rules, each on its own UDP port: a QP takes rules until the device has
// no room for more on it (ENOMEM), then the next QP takes them.
std::string Half::install_rules() {
  if (spec_.rules == 0) return {};
  rule_cq_ = ibv_create_cq(dev_->ctx, 1, nullptr, nullptr, 0);
  if (rule_cq_ == nullptr) return errno_text("ibv_create_cq");
  size_t on_last = 0;  // rules on the newest QP
  bool need_qp = true;
  while (rules_.size() < spec_.rules) {
    if (need_qp) {
      ibv_qp* qp = rule_qp(pd_, rule_cq_);
      if (qp == nullptr) return errno_text("a RAW_PACKET QP for the rules");
      rule_qps_.push_back(qp);
      on_last = 0;
      need_qp = false;
    }
    UdpRule r = udp_rule(static_cast<uint16_t>(1 + rules_.size() % 65535));
    ibv_flow* f = ibv_create_flow(rule_qps_.back(), &r.attr);
    if (f == nullptr) {
      need_qp = errno == ENOMEM && on_last > 0;  // this QP is full
      if (need_qp) continue;
      return errno_text("ibv_create_flow");
    }
    rules_.push_back(f);
    ++on_last;
  }
  return {};
}

std::string Half::probe_rules(const Device& dev) {
  PointSpec one;
  one.rules = 1;
  one.mrs = 0;
  Half h(&dev, 0, one, RunOptions{});
  h.pd_ = ibv_alloc_pd(dev.ctx);
  std::string why = h.pd_ == nullptr ? errno_text("ibv_alloc_pd") : h.install_rules();
  return why.empty() ? why : dev.name + ": " + why;
}

std::string Half::build() {
  pd_ = ibv_alloc_pd(dev_->ctx);
  if (pd_ == nullptr) return errno_text("ibv_alloc_pd");
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  for (uint32_t i = 0; i < spec_.mrs; ++i) {
    void* b = nullptr;
    if (posix_memalign(&b, 4096, spec_.mr_size) != 0) return "out of memory for the MRs";
    memset(b, 0, spec_.mr_size);
    blocks_.push_back(static_cast<uint8_t*>(b));
    ibv_mr* mr = ibv_reg_mr(pd_, b, spec_.mr_size, access);
    if (mr == nullptr) return errno_text("ibv_reg_mr");
    mrs_.push_back(mr);
  }
  grh_.assign(kGrhBytes, 0);
  grh_mr_ = ibv_reg_mr(pd_, grh_.data(), grh_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (grh_mr_ == nullptr) return errno_text("ibv_reg_mr");
  const size_t flows = size_t{spec_.ql} + spec_.qr;
  const size_t ncq = spec_.shared_cq ? opts_.threads : flows;
  const size_t per_thread = (flows + opts_.threads - 1) / opts_.threads;
  // A CQ takes the completions of its QPs' sends and receives (depth sends and kRecvWindows x
  // depth receives per QP), all of a thread's QPs on a shared one. More than the device takes would
  // overrun it: the point fails.
  const size_t recvs = recv_window();
  const size_t per_cq = (opts_.depth + recvs) * (spec_.shared_cq ? per_thread : 1) + 16;
  if (per_cq > static_cast<size_t>(dev_->attr.max_cqe))
    return "a CQ would need " + std::to_string(per_cq) + " entries, " + dev_->name + " has " +
           std::to_string(dev_->attr.max_cqe) + " (fewer QPs per thread, or --depth)";
  const size_t per_srq = recvs * per_thread + 16;
  if (spec_.srq && per_srq > static_cast<size_t>(dev_->attr.max_srq_wr))
    return "an SRQ would need " + std::to_string(per_srq) + " receives, " + dev_->name + " takes " +
           std::to_string(dev_->attr.max_srq_wr);
  for (uint32_t t = 0; opts_.events && t < opts_.threads; ++t) {
    ibv_comp_channel* ch = ibv_create_comp_channel(dev_->ctx);
    if (ch == nullptr) return errno_text("ibv_create_comp_channel");
    channels_.push_back(ch);
    fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  }
  for (size_t i = 0; i < ncq; ++i) {
    ibv_comp_channel* ch = opts_.events ? channels_[i % opts_.threads] : nullptr;
    ibv_cq* cq = ibv_create_cq(dev_->ctx, static_cast<int>(per_cq), nullptr, ch, 0);
    if (cq == nullptr) return errno_text("ibv_create_cq");
    cqs_.push_back(cq);
  }
  for (uint32_t t = 0; spec_.srq && t < opts_.threads; ++t) {
    ibv_srq_init_attr init{};
    init.attr.max_wr = static_cast<uint32_t>(per_srq);
    init.attr.max_sge = 2;
    ibv_srq* srq = ibv_create_srq(pd_, &init);
    if (srq == nullptr) return errno_text("ibv_create_srq");
    srqs_.push_back(srq);
  }
  if (std::string e = install_rules(); !e.empty()) return e;
  flows_.resize(flows);
  for (size_t i = 0; i < flows; ++i) {
    Flow& f = flows_[i];
    const bool responder = !sends(i);
    if (responder && spec_.srq) f.srq = srqs_[i % opts_.threads];
    if (!responder) f.posted_ns.assign(opts_.depth, 0);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_for(i);
    init.qp_type = spec_.qp_type;
    init.srq = f.srq;
    init.cap.max_send_wr = opts_.depth;
    init.cap.max_recv_wr = f.srq != nullptr ? 0 : recv_window();
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 2;
    init.cap.max_inline_data = spec_.inline_data ? spec_.size : 0;
    f.qp = ibv_create_qp(pd_, &init);
    if (f.qp == nullptr) return errno_text("ibv_create_qp");
  }
  return {};
}

HalfInfo Half::info() const {
  HalfInfo h;
  h.lid = dev_->port.lid;
  std::memcpy(h.gid.data(), dev_->gid.raw, 16);
  h.link_layer = dev_->port.link_layer;
  h.mtu = static_cast<uint8_t>(dev_->port.active_mtu);
  for (const ibv_mr* m : mrs_) h.mrs.push_back({reinterpret_cast<uint64_t>(m->addr), m->rkey});
  for (const Flow& f : flows_) h.qps.push_back(f.qp->qp_num);
  return h;
}

std::string Half::connect(const HalfInfo& peer) {
  if (peer.qps.size() != flows_.size() || peer.mrs.size() != mrs_.size())
    return "the other half has " + std::to_string(peer.qps.size()) + " flows and " +
           std::to_string(peer.mrs.size()) + " MRs, this one " + std::to_string(flows_.size()) +
           " and " + std::to_string(mrs_.size());
  peer_mrs_ = peer.mrs;
  for (size_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    f.peer_qpn = peer.qps[i];
    if (const char* step = connect_qp(f.qp, spec_.qp_type, f.peer_qpn, *dev_, peer))
      return errno_text((std::string("ibv_modify_qp to ") + step).c_str());
    if (sends(i) && spec_.qp_type == IBV_QPT_UD) {
      ibv_ah_attr ah{};
      ah.port_num = 1;
      ah.dlid = peer.lid;
      if (peer.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ah.is_global = 1;
        std::memcpy(ah.grh.dgid.raw, peer.gid.data(), 16);
        ah.grh.hop_limit = 64;
      }
      f.ah = ibv_create_ah(pd_, &ah);
      if (f.ah == nullptr) return errno_text("ibv_create_ah");
      ahs_.push_back(f.ah);
    }
    if (!sends(i) && spec_.opcode == Opcode::kSend)
      for (uint32_t k = 0; k < recv_window(); ++k)
        if (const int err = post_recv(f, i); err != 0) return error_text("ibv_post_recv", err);
  }
  return {};
}

int Half::post_send(Flow& f, size_t flow, uint32_t slot) {
  const uint64_t k = f.cursor++;
  const Place mine = place(mrs_.size(), spec_, k);
  const uint64_t my_addr = reinterpret_cast<uint64_t>(blocks_[mine.mr]) + mine.offset;
  const Place theirs = place(peer_mrs_.size(), spec_, k + flow);  // flows start apart
  const HalfInfo::Mr& target = peer_mrs_[theirs.mr];
  ibv_sge sge{my_addr, payload(spec_), mrs_[mine.mr]->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id(flow, slot, false);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = wr_opcode(spec_.opcode);
  wr.send_flags = IBV_SEND_SIGNALED | (spec_.inline_data ? IBV_SEND_INLINE : 0);
  if (spec_.opcode == Opcode::kAtomic) {
    wr.wr.atomic.remote_addr = target.addr + theirs.offset;
    wr.wr.atomic.rkey = target.rkey;
    wr.wr.atomic.compare_add = 1;
  } else if (spec_.qp_type == IBV_QPT_UD) {
    wr.wr.ud.ah = f.ah;
    wr.wr.ud.remote_qpn = f.peer_qpn;
    wr.wr.ud.remote_qkey = kQkey;
  } else {
    wr.wr.rdma.remote_addr = target.addr + theirs.offset;
    wr.wr.rdma.rkey = target.rkey;
  }
  f.posted_ns[slot] = now_ns();
  return ibv_post_send(f.qp, &wr, &bad);
}

int Half::post_recv(Flow& f, size_t flow) {
  const Place where = place(mrs_.size(), spec_, f.cursor++ + flow);
  ibv_sge sge[2];
  int n = 0;
  if (spec_.qp_type == IBV_QPT_UD)
    sge[n++] = {reinterpret_cast<uint64_t>(grh_.data()), kGrhBytes, grh_mr_->lkey};
  sge[n++] = {reinterpret_cast<uint64_t>(blocks_[where.mr]) + where.offset, spec_.size,
              mrs_[where.mr]->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id(flow, 0, true);
  wr.sg_list = sge;
  wr.num_sge = n;
  return f.srq != nullptr ? ibv_post_srq_recv(f.srq, &wr, &bad) : ibv_post_recv(f.qp, &wr, &bad);
}

int Half::start_sending(uint32_t thread) {
  for (size_t i = thread; i < flows_.size(); i += opts_.threads) {
    if (!sends(i)) continue;
    for (uint32_t slot = 0; slot < opts_.depth; ++slot)
      if (const int err = post_send(flows_[i], i, slot); err != 0) return err;
  }
  return 0;
}

size_t Half::flows_sending(uint32_t thread) const {
  size_t n = 0;
  for (size_t i = thread; i < flows_.size(); i += opts_.threads) n += sends(i) ? 1 : 0;
  return n;
}

int Half::poll(uint32_t thread, uint64_t now, bool counting, Tally* tally, size_t* warmed) {
  ibv_wc wc[kPollBatch];
  int seen = 0;
  for (size_t c = thread; c < cqs_.size(); c += opts_.threads) {
    const int n = ibv_poll_cq(cqs_[c], kPollBatch, wc);
    if (n < 0) {
      tally->error = "ibv_poll_cq failed";
      return -1;
    }
    seen += n;
    for (int k = 0; k < n; ++k) {
      const ibv_wc& w = wc[k];
      const size_t i = (w.wr_id & ~kRecvBit) >> 32;
      if (w.status != IBV_WC_SUCCESS || i >= flows_.size()) {
        tally->error = std::string("completion: ") + ibv_wc_status_str(w.status);
        return -1;
      }
      Flow& f = flows_[i];
      if (w.wr_id & kRecvBit) {
        if (counting && counts_at_receiver()) {
          tally->bytes += spec_.size;
          ++tally->messages;
        }
        if (const int err = post_recv(f, i); err != 0) {
          tally->error = error_text("ibv_post_recv", err);
          return -1;
        }
        continue;
      }
      const uint32_t slot = static_cast<uint32_t>(w.wr_id & 0xffffffffu);
      if (slot >= f.posted_ns.size()) {
        tally->error = "a send completion of a flow this half does not send";
        return -1;
      }
      if (!f.completed) {
        f.completed = true;
        ++*warmed;
      }
      if (counting) {
        if (tally->latencies.size() < kMaxLatencies / opts_.threads)
          tally->latencies.push_back(now - f.posted_ns[slot]);
        if (!counts_at_receiver()) {
          tally->bytes += payload(spec_);
          ++tally->messages;
        }
      }
      if (const int err = post_send(f, i, slot); err != 0) {
        tally->error = error_text("ibv_post_send", err);
        return -1;
      }
    }
  }
  return seen;
}

void Half::arm(uint32_t thread) {
  for (size_t c = thread; c < cqs_.size(); c += opts_.threads) ibv_req_notify_cq(cqs_[c], 0);
}

int Half::event_fd(uint32_t thread) const { return channels_[thread]->fd; }

void Half::take_events(uint32_t thread) {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(channels_[thread], &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

void drive(const std::vector<Half*>& halves, uint32_t thread, const RunOptions& opts,
           uint64_t start, bool start_when_warm, Meter* meter, Tally* tally) {
  const uint64_t warm_until = start + static_cast<uint64_t>(opts.warmup_s * 1e9);
  const uint64_t warm_cap = start + static_cast<uint64_t>(opts.warmup_max_s * 1e9);
  // The first failure ends every thread's loop; the point reports it.
  auto fail = [&] { meter->abort(); };
  for (Half* h : halves)
    if (const int err = h->start_sending(thread); err != 0) {
      tally->error = error_text("ibv_post_send", err);
      return fail();
    }
  size_t mine = 0, warm = 0;
  for (const Half* h : halves) mine += h->flows_sending(thread);
  bool is_warm = false;
  const uint64_t measure_ns = static_cast<uint64_t>(opts.measure_s * 1e9);
  bool armed = false;
  for (uint64_t now = now_ns(); !meter->aborted(); now = now_ns()) {
    if (!is_warm && ((warm == mine && now >= warm_until) || now >= warm_cap)) {
      is_warm = true;
      meter->thread_warm(now, start_when_warm);
    }
    const uint64_t from = meter->measure_from();
    if (from != UINT64_MAX && now >= from + measure_ns) break;
    int seen = 0;
    for (Half* h : halves) {
      const int n = h->poll(thread, now, now >= from, tally, &warm);
      if (n < 0) return fail();
      seen += n;
    }
    if (seen > 0 || !opts.events) {
      armed = false;
      continue;
    }
    // Nothing completed: arm every CQ, and sleep once they are armed and still empty (a
    // completion between the last poll and the arming is found by the next poll).
    if (!armed) {
      for (Half* h : halves) h->arm(thread);
      armed = true;
      continue;
    }
    // Until the interval ends, or at most 10 ms (the warm-up's and the meter's news).
    const uint64_t until = from == UINT64_MAX ? warm_cap : from + measure_ns;
    if (now < until) {
      pollfd fds[2];
      const size_t n = std::min<size_t>(halves.size(), 2);
      for (size_t s = 0; s < n; ++s) fds[s] = {halves[s]->event_fd(thread), POLLIN, 0};
      const auto ms = static_cast<int>(std::min<uint64_t>((until - now) / 1'000'000 + 1, 10));
      if (poll(fds, static_cast<nfds_t>(n), ms) > 0)
        for (size_t s = 0; s < n; ++s) halves[s]->take_events(thread);
    }
    armed = false;
  }
}

namespace {

double percentile(std::vector<uint64_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]);
}

}  // namespace

PointResult summarize(std::vector<Tally>& tallies, double measure_s) {
  PointResult r;
  uint64_t bytes = 0, messages = 0;
  bool weighted = false;
  for (const Tally& t : tallies) {
    if (!t.error.empty() && r.error.empty()) r.error = t.error;
    bytes += t.bytes;
    messages += t.messages;
    weighted |= t.weight != 1 && !t.latencies.empty();
  }
  if (!r.error.empty()) return r;
  if (messages == 0) {
    r.error = "no work completed in the measured interval";
    return r;
  }
  r.ok = true;
  r.bw_gbps = static_cast<double>(bytes) * 8 / measure_s / 1e9;
  r.mrate_mps = static_cast<double>(messages) / measure_s / 1e6;
  if (!weighted) {
    std::vector<uint64_t> lat;
    for (const Tally& t : tallies) lat.insert(lat.end(), t.latencies.begin(), t.latencies.end());
    r.lat_p50_us = percentile(lat, 0.50) / 1e3;
    r.lat_p99_us = percentile(lat, 0.99) / 1e3;
    return r;
  }
  std::vector<std::pair<uint64_t, double>> lat;
  double total = 0;
  for (const Tally& t : tallies)
    for (uint64_t ns : t.latencies) {
      lat.emplace_back(ns, t.weight);
      total += t.weight;
    }
  std::sort(lat.begin(), lat.end());
  auto at = [&](double q) {
    double seen = 0;
    for (const auto& [ns, w] : lat)
      if ((seen += w) > q * total) return static_cast<double>(ns);  // as floor(q n) unweighted
    return lat.empty() ? 0.0 : static_cast<double>(lat.back().first);
  };
  r.lat_p50_us = at(0.50) / 1e3;
  r.lat_p99_us = at(0.99) / 1e3;
  return r;
}

}  // namespace wharf::scala
