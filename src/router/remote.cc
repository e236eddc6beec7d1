// The host-to-host engine: see remote.h.
#include "router/remote.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <optional>

#include "common/clock.h"
#include "emulator/rnic_emulator.h"
#include "proto/device.h"
#include "proto/multicast.h"
#include "proto/pingmesh_wire.h"
#include "proto/qp_rules.h"
#include "proto/vip_gid.h"
#include "router/cm_manager.h"
#include "router/host_objects.h"
#include "router/memory_window.h"
#include "router/peer_rules.h"
#include "router/router_config.h"
#include "router/scheduler.h"
#include "router/session.h"
#include "shm/cq_ring.h"

namespace wharf::router {
namespace {

using proto::host::Packet;
namespace host = proto::host;

constexpr int kBudgetPerQp = 32;

using host::ends_message;
using host::has_imm;
using host::has_invalidate;
using host::is_send;
using host::is_write;
using host::starts_message;
using rc::packets_for;
using rc::psn_add;
using rc::psn_diff;
using rc::psn_lt;

// The transport a connected QP's packets travel in: XRC initiators and targets use XRC.
host::Transport transport_of(const Qp* qp) {
  if (qp->type == IBV_QPT_UC) return host::kUc;
  if (qp->type == IBV_QPT_XRC_SEND || qp->type == IBV_QPT_XRC_RECV) return host::kXrc;
  return host::kRc;
}

// The operation of packet k of n of a SEND or WRITE message.
uint8_t packet_operation(uint8_t wr_opcode, uint32_t k, uint32_t n) {
  const bool write = wr_opcode == IBV_WR_RDMA_WRITE || wr_opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  const bool imm = proto::carries_immediate(wr_opcode);
  const uint8_t base = write ? host::kWriteFirst : host::kSendFirst;
  if (wr_opcode == IBV_WR_ATOMIC_WRITE) return host::kAtomicWrite;  // always one packet
  if (k + 1 < n) return static_cast<uint8_t>(k == 0 ? base : base + 1);
  if (wr_opcode == IBV_WR_SEND_WITH_INV)
    return n == 1 ? host::kSendOnlyInvalidate : host::kSendLastInvalidate;
  if (n == 1) return static_cast<uint8_t>(base + (imm ? 5 : 4));
  return static_cast<uint8_t>(base + (imm ? 3 : 2));
}

uint8_t link_class(const Qp* qp, const proto::AhAttr& ah) {
  return link_class(qp->owner->container(), ah);
}

bool is_read_or_atomic(uint8_t wr_opcode) {
  return wr_opcode == IBV_WR_RDMA_READ || wr_opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
         wr_opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

rc::RequestKind request_kind(uint8_t wr_opcode) {
  if (wr_opcode == IBV_WR_RDMA_READ) return rc::RequestKind::kRead;
  return is_read_or_atomic(wr_opcode) ? rc::RequestKind::kAtomic : rc::RequestKind::kMessage;
}

// A packet's payload, [off, off + count) of a segment list of registered memory, copied
// straight into the link's queue (HostLinks::send's FillPayload): no bounce buffer. `fault`
// tells a source that could not be read from a link that had no room (a READ's responder
// answers the first with a NAK; the SEND and WRITE path takes both for no room, as it did).
struct PayloadSource {
  const SegmentList* list;
  uint64_t off;
  bool fault = false;
};
bool fill_payload(void* ctx, uint8_t* dst, uint32_t count) {
  auto* from = static_cast<PayloadSource*>(ctx);
  const Segment to{dst, 0, 0, count};
  from->fault = copy_spans(from->list->seg, from->list->count, from->off, &to, 1, 0, count) != 0;
  return !from->fault;
}

// Packets this long belong to long messages: moving them takes the router many microseconds.
constexpr uint32_t kBulkPacketBytes = 16 * 1024;
// A packet of kBulkPacketBytes or more went out or came in for a QP whose application awaits
// the CQE `cq` will get (null: none): its pollers may nap while the rest moves
// (shm::bulk_nap_ns), leaving the router the core. The requester of a SEND, WRITE or READ
// awaits its send CQ; the responder of a READ the peer's next message, in its receive CQ. Not
// for the target of a SEND or WRITE, whose application may be watching its memory.
void keep_bulk_window_open(const Cq* cq, uint64_t now) {
  if (cq != nullptr) shm::extend_bulk_window(&cq->notify->bulk_until_ns, now);
}

// The QP attributes its requester obeys.
rc::RequesterLimits requester_limits(const Qp* qp, uint64_t watchdog_ns) {
  return rc::RequesterLimits{qp->attr.timeout, qp->attr.retry_cnt, qp->attr.rnr_retry,
                             qp->attr.max_rd_atomic, watchdog_ns};
}

// Records the completion about to be made of the work request at `ring_index` (cq: where
// its entry goes, null if it has none), before the ring's consumer index moves past it (whose
// release store orders these stores before it): RemoteQpState::CompletionUnderWay.
void record_completion(RemoteQpState::CompletionUnderWay* rec, const Cq* cq, const shm::Cqe& c,
                       uint32_t ring_index) {
  rec->cqe = c;
  rec->ring_index = ring_index;
  rec->post = cq != nullptr;
  rec->cq_position = cq != nullptr ? cq->ring.position() : 0;
}

// Finishes a completion the previous process left half made (RemoteQpState::continuation):
// its entry goes to cq unless the CQ holds it already.
void finish_completion_st(Cq* cq, const std::optional<RemoteQpState::CompletionUnderWay>& c,
                          uint32_t qpn) {
  if (!c.has_value() || cq == nullptr || c->cqe.qp_num != qpn) return;
  post_cqe_unless_published_st(cq, c->cq_position, c->cqe, c->solicited);
}

// The config's kept states, or (no path, or it cannot be used) states in anonymous memory.
std::unique_ptr<KeptRemoteStates> open_kept_states(const RouterConfig& cfg, size_t hosts) {
  auto kept = std::make_unique<KeptRemoteStates>();
  const uint32_t fresh = links::HostLinks::fresh_incarnation();
  if (int err = kept->open(cfg.kept_state_path, fresh, hosts); err != 0) {
    spdlog::warn("{}: {}; connections to other hosts will not outlive this process",
                 cfg.kept_state_path, strerror(err));
    kept = std::make_unique<KeptRemoteStates>();
    if (kept->open("", fresh, hosts) != 0) throw std::bad_alloc();
  }
  return kept;
}

}  // namespace

RemotePath::RemotePath(const PathContext& paths, const RouterConfig& cfg, RouterCounters& counters,
                       CmManager& cm, NetworkNumbers& networks,
                       std::unique_ptr<links::StaticCluster> dir)
    : paths_(paths),
      cfg_(cfg),
      counters_(counters),
      cm_(cm),
      networks_(networks),
      dir_(std::move(dir)),
      tls_(cfg.link_cert.empty()
               ? nullptr
               : links::LinkTls::load(cfg.link_ca, cfg.link_cert, cfg.link_key,
                                      dir_->hosts()[static_cast<size_t>(dir_->self())].name,
                                      cfg.link_encrypt, &tls_error_)),
      kept_(open_kept_states(cfg, dir_->hosts().size())),
      links_(dir_.get(), cfg.node_guid, this, links::HostLinks::kSendBudget, tls_.get(),
             kept_->incarnation()),
      express_(cfg, paths.objects, *this, dir_.get(), links_.own_incarnation(), tls_.get()),
      refused_since_(dir_->hosts().size(), 0),
      bounce_(host::kMaxSegment),
      peer_networks_(dir_->hosts().size()),
      told_(dir_->hosts().size(), false) {}

// The kept states stay as they are (a router stopped on purpose is continued by the next
// one as a crashed one is); only those on the heap go.
RemotePath::~RemotePath() {
  for (auto& [qp, st] : states_)
    if (!kept_->holds(st)) delete st;
}

int RemotePath::start() {
  if (!cfg_.link_cert.empty() && tls_ == nullptr) {
    spdlog::error("host links: {}", tls_error_);
    return EINVAL;
  }
  if (int e = links_.start(); e != 0) return e;
  if (cfg_.pingmesh_interval_ns != 0 && dir_->hosts().size() > 1) {
    const auto mesh = [this] {
      return std::make_unique<pingmesh::Mesh>(static_cast<int>(dir_->hosts().size()), dir_->self(),
                                              cfg_.pingmesh_interval_ns,
                                              now_ns() + cfg_.pingmesh_interval_ns);
    };
    pingmesh_ = mesh();
    // Numbering a network announces it: the other routers that number it too answer.
    for (const auto& [tenant, network] : cfg_.pingmesh_networks)
      network_meshes_.push_back({tenant, network, networks_.number(tenant, network), mesh()});
  }
  if (!cfg_.express) return 0;
  if (int e = express_.start(); e != 0) {
    spdlog::warn(
        "express lines: cannot listen on the host-link port + 1 ({}): all traffic "
        "between hosts goes through the routers",
        strerror(e));
  }
  return 0;
}

int RemotePath::host_for(const proto::AhAttr& ah, const Container* from) const {
  int h = -1;
  if (uint32_t vip = 0;
      !placements_.empty() && from != nullptr && ah.is_global && proto::vip_of_gid(ah.dgid, &vip)) {
    auto it = placements_.find(uint64_t{from->network_id} << 32 | vip);
    if (it != placements_.end()) h = it->second;
  }
  if (h < 0) h = dir_->host_for(ah, cfg_.link_layer);
  return h >= 0 && h != dir_->self() ? h : -1;
}

int RemotePath::peer_host(const Qp* qp) const {
  if (qp->peer_host_epoch == placement_epoch_) return qp->peer_host_cached;
  const bool connected = qp->type == IBV_QPT_RC || qp->type == IBV_QPT_UC ||
                         qp->type == IBV_QPT_XRC_SEND || qp->type == IBV_QPT_XRC_RECV;
  qp->peer_host_cached =
      static_cast<int16_t>(connected ? host_for(qp->attr.ah_attr, qp->owner->container()) : -1);
  qp->peer_host_epoch = placement_epoch_;
  return qp->peer_host_cached;
}

void RemotePath::set_placement_st(uint32_t network_id, uint32_t vip, const std::string& host) {
  if (++placement_epoch_ == 0) {
    // Every cached peer host is stale. The epoch starts its next turn, where a QP cached in
    // the last one could take its old answer for a new one: no QP keeps any.
    placement_epoch_ = 1;
    paths_.objects.for_each_qp([](Qp* qp) { qp->peer_host_epoch = 0; });
  }
  const uint64_t key = uint64_t{network_id} << 32 | vip;
  const auto& hosts = dir_->hosts();
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].name == host) {
      placements_[key] = static_cast<int>(i);
      return;
    }
  }
  placements_.erase(key);
}

RemotePath::State& RemotePath::state(Qp* qp) {
  if (qp->remote == nullptr) {
    const ParkedRemoteQp& p = qp->parked_remote;
    const State initial = p.parked ? State(p) : State(qp->attr.sq_psn, qp->attr.rq_psn);
    State* st = kept_->take_active(qp->qpn, initial);
    if (st == nullptr) st = new State(initial);  // every slot taken: not kept
    states_.emplace(qp, st);
    // After the active slot is written: a process killed in between leaves both.
    if (p.parked) kept_->release_parked(qp->qpn);
    qp->remote = st;
    qp->parked_remote = ParkedRemoteQp{};
  }
  return *qp->remote;
}

void RemotePath::drop_state(State* st) {
  if (kept_->holds(st))
    kept_->release_active(st);
  else
    delete st;
}

bool RemotePath::restore_st(Qp* qp) {
  if (qp->remote != nullptr) return false;
  RemoteQpState::RingTails tails{qp->sq().tail(), qp->rq_entries != 0 ? qp->rq().tail() : 0};
  if (const HeldRecv* held = qp->held_recv(); held != nullptr && held->held)
    tails.srq_held = held->record;
  if (qp->srq != nullptr && qp->srq->has_claimed) tails.srq_claimed = qp->srq->claimed_record;
  auto finish = [qp](const RemoteQpState::Unfinished& u) {
    finish_completion_st(qp->send_cq, u.send, qp->qpn);
    finish_completion_st(qp->recv_cq, u.receive, qp->qpn);
  };
  RemoteQpState* active = nullptr;
  ParkedRemoteQp parked;
  if (!kept_->claim_orphan(qp->qpn, tails, finish, &active, &parked)) return false;
  if (active != nullptr) {
    states_.emplace(qp, active);
    qp->remote = active;
  } else {
    qp->parked_remote = parked;
  }
  return true;
}

bool RemotePath::parkable(const Qp* qp, const State& st) const {
  if (!st.requester.quiescent() || !st.responder.quiescent() || st.unsent || st.acking ||
      st.uc_tail.pending)
    return false;
  return std::find(responding_.begin(), responding_.end(), qp) == responding_.end();
}

void RemotePath::park_quiet_st() {
  size_t parked = 0;
  for (auto it = states_.begin(); it != states_.end();) {
    Qp* qp = it->first;
    State& st = *it->second;
    const uint64_t psns = uint64_t{st.requester.next_psn()} << 32 | st.responder.epsn();
    if (psns != st.swept_psns || !parkable(qp, st)) {
      st.swept_psns = psns;
      ++it;
      continue;
    }
    qp->parked_remote = st.parked();
    // Kept before its active slot goes: a process killed in between leaves both.
    kept_->keep_parked(qp->qpn, qp->parked_remote);
    qp->remote = nullptr;
    drop_state(&st);
    it = states_.erase(it);
    ++parked;
  }
  if (parked >= kTrimAfterParking) {
    // Many states went at once (a burst of QPs fell quiet): give the map's buckets and the
    // slots' pages back rather than keep them for a burst that may never come again.
    states_.rehash(0);
    kept_->trim();
    malloc_trim(0);
  }
  kept_->drop_stale_orphans(now_ns());
}

void RemotePath::forget_st(Qp* qp) {
  express_.forget_st(qp);
  if (auto it = states_.find(qp); it != states_.end()) {
    drop_state(it->second);
    states_.erase(it);
  }
  if (qp->parked_remote.parked) kept_->release_parked(qp->qpn);
  qp->remote = nullptr;
  qp->parked_remote = ParkedRemoteQp{};
  responding_.erase(std::remove(responding_.begin(), responding_.end(), qp), responding_.end());
  acking_.erase(std::remove(acking_.begin(), acking_.end(), qp), acking_.end());
}

uint64_t RemotePath::next_deadline() const {
  uint64_t next = links_.next_wakeup_ns();
  // While any QP holds state, the parking sweep is due (the router may sleep through it).
  if (!states_.empty())
    next = next == 0 ? swept_ns_ + kParkSweepNs : std::min(next, swept_ns_ + kParkSweepNs);
  if (pingmesh_ != nullptr && (next == 0 || pingmesh_->next_round_ns() < next))
    next = pingmesh_->next_round_ns();
  for (const NetworkMesh& m : network_meshes_)
    if (next == 0 || m.mesh->next_round_ns() < next) next = m.mesh->next_round_ns();
  for (const auto& [qp, st] : states_) {
    const uint64_t t = st->requester.deadline();
    if (t != 0 && (next == 0 || t < next)) next = t;
  }
  return next;
}

bool RemotePath::poll_st(bool router_busy, bool express_input) {
  bool did = false;
  const uint64_t now = now_ns();
  if (!router_busy || links_busy_ || now - links_looked_ns_ >= kQuietLinkLookNs) {
    links_busy_ = links_.poll();
    links_looked_ns_ = now;
    did = links_busy_;
  }
  did |= express_.poll_st(express_input);
  did |= probe_peers_st(now);
  if (now - swept_ns_ >= kParkSweepNs) {
    park_quiet_st();
    swept_ns_ = now;
  }
  // Responders whose answers waited for room on their link.
  for (size_t i = 0; i < responding_.size();) {
    did |= pump_responses_st(responding_[i]);
    if (state(responding_[i]).responder.owed.empty()) {
      responding_[i] = responding_.back();
      responding_.pop_back();
    } else {
      ++i;
    }
  }
  return did;
}

// ---- Requester ----

proto::host::PacketHeader RemotePath::request_header(const Qp* qp, const proto::AhAttr& ah,
                                                     uint32_t dest_qpn, int host) const {
  proto::host::PacketHeader h;
  h.network = peer_network(host, qp->owner->container());
  h.sl = ah.sl;
  h.dlid = ah.dlid;
  h.slid = cfg_.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : qp->owner->container()->lid;
  h.dest_qpn = dest_qpn & rc::kPsnMask;
  h.src_qpn = qp->qpn;
  return h;
}

// Sends the packets of one SEND or WRITE message from PSN *psn on while the link takes them,
// moving *psn past each one sent. False when its payload cannot be gathered any more.
bool RemotePath::send_message_st(Executor* ex, Qp* qp, int dest, const Request& o, uint32_t* psn,
                                 const Fresh* fresh) {
  SendWork reread;
  SegmentList gathered;
  if (fresh == nullptr &&
      (!reread_st(qp, o.work, &reread) || !ex->gather_local_st(qp, reread, false, &gathered) ||
       gathered.total != o.work.byte_len))
    return false;
  const SendWork& w = fresh != nullptr ? *fresh->w : reread;
  const SegmentList& local = fresh != nullptr ? *fresh->local : gathered;
  const uint8_t op = o.work.opcode;
  const uint64_t len = local.total;
  const uint32_t n = packets_for(len);
  for (uint32_t k = psn_diff(*psn, o.first_psn); k < n; ++k) {
    const uint64_t off = uint64_t{k} * host::kMaxSegment;
    const uint32_t chunk = static_cast<uint32_t>(std::min<uint64_t>(host::kMaxSegment, len - off));
    Packet p;
    p.hdr = request_header(qp, qp->attr.ah_attr, qp->attr.dest_qp_num, dest);
    p.hdr.opcode =
        host::opcode_of(transport_of(qp), static_cast<host::Operation>(packet_operation(op, k, n)));
    p.xrc_srqn = w.hdr.remote_srqn;
    p.hdr.psn = psn_add(o.first_psn, k);
    if (k + 1 == n)
      p.hdr.flags = host::kAckRequest | ((w.hdr.flags & shm::kWqeSolicited) ? host::kSolicited : 0);
    p.reth = host::Reth{w.hdr.remote_addr, w.hdr.rkey, static_cast<uint32_t>(len)};
    p.imm = op == IBV_WR_SEND_WITH_INV ? w.hdr.rkey : w.hdr.imm_data;
    p.payload_len = chunk;
    PayloadSource piece{&local, off};
    if (!host::finish_packet(&p)) return false;
    if (!links_.send(dest, link_class(qp, qp->attr.ah_attr), p, fill_payload, &piece)) return true;
    if (chunk >= kBulkPacketBytes) keep_bulk_window_open(qp->send_cq, now_ns());
    *psn = psn_add(p.hdr.psn, 1);
  }
  return true;
}

// Sends what is left of request o from PSN *psn on (a SEND or WRITE message, or a READ or
// atomic request, one packet) while the link takes it; *psn moves past what was sent: past
// o.last_psn once all of it went. False when o cannot be sent any more.
bool RemotePath::send_request_st(Executor* ex, Qp* qp, int dest, const Request& o, uint32_t* psn,
                                 const Fresh* fresh) {
  release_ack_st(qp);
  const uint8_t op = o.work.opcode;
  if (!is_read_or_atomic(op)) return send_message_st(ex, qp, dest, o, psn, fresh);
  SendWork reread;
  if (fresh == nullptr && !reread_st(qp, o.work, &reread)) return false;
  const SendWork& w = fresh != nullptr ? *fresh->w : reread;
  Packet p;
  p.hdr = request_header(qp, qp->attr.ah_attr, qp->attr.dest_qp_num, dest);
  p.hdr.opcode =
      host::opcode_of(transport_of(qp), op == IBV_WR_RDMA_READ              ? host::kReadRequest
                                        : op == IBV_WR_ATOMIC_FETCH_AND_ADD ? host::kFetchAdd
                                                                            : host::kCompareSwap);
  p.xrc_srqn = w.hdr.remote_srqn;
  p.hdr.psn = o.first_psn;
  p.hdr.flags = host::kAckRequest;
  p.reth = host::Reth{w.hdr.remote_addr, w.hdr.rkey, o.work.byte_len};
  p.atomic.va = w.hdr.remote_addr;
  p.atomic.rkey = w.hdr.rkey;
  p.atomic.swap_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? w.hdr.compare_add : w.hdr.swap;
  p.atomic.compare = w.hdr.compare_add;
  if (!host::finish_packet(&p)) return false;
  // A READ takes one PSN per response packet: they all belong to this one request packet.
  if (links_.send(dest, link_class(qp, qp->attr.ah_attr), p)) *psn = psn_add(o.last_psn, 1);
  return true;
}

// The requester asks for request o to be sent (new, or again). It goes now from its first
// packet, as far as the link takes it, unless packets before it still wait for room: then it
// waits behind them. What the link did not take waits in the QP's state (unsent_psn) and goes
// in later passes (send_unsent_st), so a message longer than a link's queue goes at all.
bool RemotePath::transmit_st(Executor* ex, Qp* qp, int dest, const Request& o, const Fresh* fresh) {
  State& st = state(qp);
  if (qp->type == IBV_QPT_UC) {
    uint32_t psn = o.first_psn;
    if (send_request_st(ex, qp, dest, o, &psn, fresh) && psn_lt(o.last_psn, psn)) return true;
    st.uc_tail = State::UcTail{o, psn, true};
    return false;  // completed by send_uc_tail_st
  }
  if (st.unsent && psn_lt(st.unsent_psn, o.first_psn)) return true;
  st.unsent = false;
  uint32_t psn = o.first_psn;
  if (!send_request_st(ex, qp, dest, o, &psn, fresh)) return false;
  if (!psn_lt(o.last_psn, psn)) {
    st.unsent = true;
    st.unsent_psn = psn;
  }
  return true;
}

bool RemotePath::send_uc_tail_st(Executor* ex, Qp* qp, int dest, bool* did) {
  State& st = state(qp);
  State::UcTail* tail = &st.uc_tail;
  if (!tail->pending) return false;
  const uint32_t before = tail->psn;
  const bool sendable = send_request_st(ex, qp, dest, tail->request, &tail->psn);
  *did = *did || tail->psn != before;
  if (sendable && psn_lt(tail->request.last_psn, tail->psn)) {
    tail->pending = false;
    complete_send_st(qp, tail->request.work, IBV_WC_SUCCESS);
    *did = true;
    return false;
  }
  if (sendable) return true;
  // Its memory is gone (deregistered): what went is a message the responder drops.
  tail->pending = false;
  complete_send_st(qp, tail->request.work, IBV_WC_LOC_PROT_ERR);
  ex->to_error_st(qp);
  *did = true;
  return true;
}

// Sends, in PSN order, the packets of the window the link had no room for, while it has.
// An RNR wait sends nothing (the refused request goes again when it ends); its probe sends
// only the refused request. True if anything was sent.
bool RemotePath::send_unsent_st(Executor* ex, Qp* qp, int dest, uint64_t now,
                                const rc::RequesterLimits& limits) {
  State& st = state(qp);
  if (!st.unsent) return false;
  const auto& req = st.requester;
  if (req.holding() && !req.probing()) {
    st.unsent = false;
    return false;
  }
  bool sent = false;
  bool first = true;
  for (const Request& o : req.window()) {
    const bool front = first;
    first = false;
    if (psn_lt(o.last_psn, st.unsent_psn)) continue;  // went already
    if (!front && req.probing()) break;               // only the probe goes
    uint32_t psn = psn_lt(st.unsent_psn, o.first_psn) ? o.first_psn : st.unsent_psn;
    const uint32_t before = psn;
    if (!send_request_st(ex, qp, dest, o, &psn)) break;  // the ACK timer sends it again
    sent = sent || psn != before;
    st.unsent_psn = psn;
    if (!psn_lt(o.last_psn, psn)) {  // the link is full again
      if (sent) st.requester.transmitted(now, limits);
      return sent;
    }
  }
  st.unsent = false;  // all of it went (or cannot go: the ACK timer sends it again)
  if (sent) st.requester.transmitted(now, limits);
  return sent;
}

bool RemotePath::reread_st(Qp* qp, const RemoteQpState::Work& o, SendWork* w) {
  return qp->copy_send(qp->sq().slot_at(o.ring_index), w) && w->hdr.opcode == o.opcode;
}

void RemotePath::complete_send_st(Qp* qp, const RemoteQpState::Work& o, ibv_wc_status status) {
  shm::RingConsumerView sq = qp->sq();
  assert(o.ring_index == sq.tail());  // completions come in order, from the ring's head
  const bool post = o.signaled || status != IBV_WC_SUCCESS;
  shm::Cqe c{};
  if (post) {
    shm::SendWqe h;  // only its wr_id is taken: the rest was checked when o was issued
    std::memcpy(&h, sq.slot_at(o.ring_index), sizeof(h));
    c = make_cqe(h.wr_id, status, proto::send_wc_opcode(o.opcode), qp->qpn);
    c.byte_len = o.byte_len;
  }
  if (qp->remote != nullptr)
    record_completion(&qp->remote->sending, post ? qp->send_cq : nullptr, c, o.ring_index);
  sq.pop();
  qp->direct()->sq_retired.fetch_add(1, std::memory_order_release);
  count_send_completion(qp, o.opcode, status, o.byte_len);
  if (post) post_cqe_st(qp->send_cq, c, false);
}

// What the requester of one QP asks of this router, for the length of one call into it.
class RemotePath::RequesterCalls final : public rc::RequesterPort<RemoteQpState::Work> {
 public:
  RequesterCalls(RemotePath* path, Executor* ex, Qp* qp, int host)
      : path_(path), ex_(ex), qp_(qp), host_(host) {}
  // Whether the QP failed (moved to ERR) during the call.
  bool failed() const { return failed_; }

  bool transmit(const Request& r) override {
    const bool first = fresh_ != nullptr && fresh_->ring_index == r.work.ring_index;
    const bool sent = path_->transmit_st(ex_, qp_, host_, r, first ? fresh_ : nullptr);
    // Every transmission but the one issue() makes is a retransmission (go-back-N, an ACK
    // timeout, an RNR wait's end, a returning link); a READ or an atomic is one packet.
    if (!first && sent)
      path_->links_.count_transport(
          host_, link_class(qp_, qp_->attr.ah_attr),
          r.kind == rc::RequestKind::kMessage ? rc::psn_diff(r.last_psn, r.first_psn) + 1 : 1, 0);
    return sent;
  }
  // The work request being issued, until the next (null: none).
  void issuing(const Fresh* fresh) { fresh_ = fresh; }
  void complete(const Request& r, ibv_wc_status status) override {
    path_->complete_send_st(qp_, r.work, status);
  }
  bool place_read(const Request& r, uint32_t index, const uint8_t* data, uint32_t len) override {
    const uint64_t off = uint64_t{index} * host::kMaxSegment;
    SegmentList local;
    if (!RemotePath::read_target_st(ex_, qp_, r, off + len, &local)) return false;
    // Nothing to copy when the link received the data in place (payload_destination).
    if (len == 0 || contiguous_at(local, off, len) == data) return true;
    const Segment src{const_cast<uint8_t*>(data), 0, 0, len};
    return copy_spans(&src, 1, 0, local.seg, local.count, off, len) == 0;
  }
  bool place_atomic(const Request& r, uint64_t original) override {
    SendWork w;
    SegmentList local, result;
    result.push(Segment{reinterpret_cast<uint8_t*>(&original), 0, 0, 8});
    return RemotePath::reread_st(qp_, r.work, &w) && ex_->gather_local_st(qp_, w, true, &local) &&
           local.total == 8 && copy_segments(result, local, 8) == 0;
  }
  void fail() override {
    ex_->to_error_st(qp_);
    failed_ = true;
  }
  void rnr_refused(uint64_t stalled_ns, bool isolated) override {
    RouterCounters& counters = path_->counters_;
    counters.rnr_naks_received++;
    path_->links_.count_transport(host_, link_class(qp_, qp_->attr.ah_attr), 0, 1);
    if (!isolated) return;
    counters.watchdog_isolations++;
    spdlog::warn(
        "watchdog: QP {:#x} of pid {} made no progress for {} ms: its peer QP {:#x} on {} "
        "posts no receives; moved to error ({} QPs isolated so far)",
        qp_->qpn, qp_->owner->pid(), stalled_ns / 1000000, qp_->attr.dest_qp_num,
        path_->dir_->hosts()[static_cast<size_t>(host_)].name, counters.watchdog_isolations);
  }

 private:
  RemotePath* path_;
  Executor* ex_;
  Qp* qp_;
  int host_;
  bool failed_ = false;
  const Fresh* fresh_ = nullptr;
};

bool RemotePath::process_requester_st(Executor* ex, Qp* qp, int dest, uint64_t now) {
  shm::RingStatus head;
  shm::RingConsumerView sq = qp->sq();
  if (qp->remote == nullptr && sq.peek(&head) == nullptr) return false;  // quiet: stays so
  State& st = state(qp);
  auto& req = st.requester;
  RequesterCalls calls(this, ex, qp, dest);
  const rc::RequesterLimits limits = requester_limits(qp, cfg_.watchdog_ns);
  bool did = req.tick(now, limits, calls);
  if (calls.failed()) return true;
  did = send_unsent_st(ex, qp, dest, now, limits) || did;
  if (send_uc_tail_st(ex, qp, dest, &did)) return did;

  for (int budget = kBudgetPerQp; budget > 0 && now >= qp->work().paced_until_ns; --budget) {
    if (req.holding()) break;  // an RNR wait holds everything behind it
    // The window's work keeps its slots until it completes: the next request is behind it.
    const auto ahead = static_cast<uint32_t>(req.window().size());
    shm::RingStatus rs;
    const uint8_t* slot = sq.peek_ahead(ahead, &rs);
    if (slot == nullptr) break;
    SendWork w;
    RemoteQpState::Work o;
    o.ring_index = sq.tail() + ahead;
    ibv_wc_status failure = IBV_WC_SUCCESS;
    SegmentList local;
    const bool well_formed = qp->copy_send(slot, &w);
    o.opcode = w.hdr.opcode;
    o.signaled = (w.hdr.flags & shm::kWqeSignaled) || qp->sq_sig_all;
    if (!well_formed) {
      failure = IBV_WC_LOC_QP_OP_ERR;
    } else if (proto::is_window_op(o.opcode)) {
      // Acts on this host's windows only, once everything before it completed (in order).
      if (!req.idle()) break;
      const ibv_wc_status status = execute_window_op(paths_.objects, qp, w.hdr);
      complete_send_st(qp, o, status);
      if (status != IBV_WC_SUCCESS) {
        ex->to_error_st(qp);
        return true;
      }
      did = true;
      continue;
    } else if (!ex->gather_local_st(qp, w, is_read_or_atomic(o.opcode), &local)) {
      failure = IBV_WC_LOC_PROT_ERR;  // READ and atomic results need local write access
    } else if (local.total > device::kMaxMsgSize ||
               (is_read_or_atomic(o.opcode) && o.opcode != IBV_WR_RDMA_READ && local.total != 8) ||
               (o.opcode == IBV_WR_ATOMIC_WRITE && local.total != proto::kAtomicWriteSize)) {
      failure = IBV_WC_LOC_LEN_ERR;
    }
    if (failure != IBV_WC_SUCCESS) {
      // Completions stay in order: the failure waits until everything before it completed.
      if (!req.idle()) break;
      o.byte_len = static_cast<uint32_t>(local.total);
      complete_send_st(qp, o, failure);
      ex->to_error_st(qp);
      return true;
    }
    const rc::RequestKind kind = request_kind(o.opcode);
    // A READ uses one PSN per response packet, an atomic one.
    const uint32_t n = kind == rc::RequestKind::kAtomic ? 1 : packets_for(local.total);
    // New work waits while older packets wait for the link, and until the link takes at least
    // its first packet: this QP waits, others go on. A message longer than the room goes on
    // as the link drains (send_unsent_st).
    const size_t need = std::min<size_t>(
        (kind == rc::RequestKind::kMessage ? local.total : 0) + n * (host::kPacketHeaderSize + 64),
        host::kMaxPacketSize);
    if (st.unsent || links_.room(dest, link_class(qp, qp->attr.ah_attr)) < need) break;
    if (!req.may_issue(kind, limits)) break;
    if (!paths_.scheduler.admit(qp, rate_charge(w), now))
      break;  // over its rate: waits, others go on
    o.byte_len = static_cast<uint32_t>(local.total);
    did = true;
    ex->charge_start_st(qp, w);
    const Fresh fresh{o.ring_index, &w, &local};
    calls.issuing(&fresh);
    if (qp->type != IBV_QPT_UC) {
      req.issue(o, kind, n, now, limits, calls);
      calls.issuing(nullptr);
      continue;
    }
    req.issue_unreliable(o, n, calls);  // unreliable: done once sent
    calls.issuing(nullptr);
    // What the link did not take keeps its WQE at the ring's head (send_uc_tail_st).
    if (st.uc_tail.pending) break;
  }
  return did;
}

bool RemotePath::flush_st(Qp* qp) {
  if (qp->remote == nullptr) return false;
  Executor ex(paths_, now_ns());
  RequesterCalls calls(this, &ex, qp, -1);
  bool did = qp->remote->requester.flush(calls);
  State::UcTail* tail = &qp->remote->uc_tail;
  if (tail->pending) {
    tail->pending = false;
    complete_send_st(qp, tail->request.work, IBV_WC_WR_FLUSH_ERR);
    did = true;
  }
  return did;
}

// The local connected QP a packet from `src_host` is for: it must be connected to the sender.
// An XRC request is for a target, an XRC response for an initiator.
Qp* RemotePath::local_qp_for(int src_host, const Packet& p, bool response) const {
  Qp* q = paths_.objects.qp_by_qpn(p.hdr.dest_qpn);
  const uint8_t transport = p.hdr.opcode & 0xe0;
  const ibv_qp_type type = transport == host::kUc    ? IBV_QPT_UC
                           : transport != host::kXrc ? IBV_QPT_RC
                           : response                ? IBV_QPT_XRC_SEND
                                                     : IBV_QPT_XRC_RECV;
  if (q == nullptr || q->type != type || q->attr.dest_qp_num != p.hdr.src_qpn ||
      peer_host(q) != src_host)
    return nullptr;
  return q;
}

void RemotePath::send_datagram_st(Qp* qp, const SendWork& w, const SegmentList& local,
                                  const proto::AhAttr& ah, uint32_t qkey, int dest) {
  const auto len = static_cast<uint32_t>(local.total);  // <= kUdMaxPayload, checked by caller
  SegmentList bounce;
  bounce.push(Segment{bounce_.data(), 0, 0, len});
  if (len != 0 && copy_segments(local, bounce, len) != 0) return;
  const Container* me = qp->owner->container();
  Packet p;
  p.hdr = request_header(qp, ah, w.hdr.remote_qpn, dest);
  p.hdr.opcode = host::opcode_of(
      host::kUd, w.hdr.opcode == IBV_WR_SEND_WITH_IMM ? host::kSendOnlyImm : host::kSendOnly);
  p.hdr.flags = (w.hdr.flags & shm::kWqeSolicited) ? host::kSolicited : 0;
  p.deth = host::Deth{qkey, qp->qpn};
  p.imm = w.hdr.imm_data;
  if (ah.is_global) {
    p.hdr.flags |= host::kHasGrh;
    p.grh.ver_tc_flow = (6u << 28) | (uint32_t{ah.traffic_class} << 20) | (ah.flow_label & 0xfffff);
    p.grh.hop_limit = ah.hop_limit;
    p.grh.sgid = me->gid;
    p.grh.dgid = ah.dgid;
  }
  p.payload = bounce_.data();
  p.payload_len = len;
  if (host::finish_packet(&p))
    (void)links_.send(dest, link_class(qp, ah), p);  // a full link drops it, as UD may
}

void RemotePath::flood_datagram_st(Qp* qp, const SendWork& w, const SegmentList& local,
                                   const proto::AhAttr& ah, uint32_t qkey) {
  const int hosts = static_cast<int>(dir_->hosts().size());
  for (int h = 0; h < hosts; ++h)
    if (h != dir_->self()) send_datagram_st(qp, w, local, ah, qkey, h);
}

void RemotePath::flood_frame_st(Qp* qp, const SegmentList& frame) {
  const auto len = static_cast<uint32_t>(frame.total);  // <= kMaxRawFrame, checked by caller
  SegmentList bounce;
  bounce.push(Segment{bounce_.data(), 0, 0, len});
  if (copy_segments(frame, bounce, len) != 0) return;
  const int hosts = static_cast<int>(dir_->hosts().size());
  for (int h = 0; h < hosts; ++h) {
    if (h == dir_->self()) continue;
    Packet p;
    p.hdr = request_header(qp, proto::AhAttr{}, host::kRawFrameQpn, h);
    // A network that host has not numbered has no member there: nothing to send.
    if (p.hdr.network == 0) continue;
    p.hdr.opcode = host::opcode_of(host::kUd, host::kSendOnly);
    p.deth = host::Deth{0, qp->qpn};
    p.payload = bounce_.data();
    p.payload_len = len;
    if (host::finish_packet(&p)) (void)links_.send(h, link_class(qp, proto::AhAttr{}), p);
  }
}

bool RemotePath::send_router_datagram_st(int host, uint32_t qpn, uint32_t qkey, const uint8_t* body,
                                         uint32_t len, uint32_t network) {
  Packet p;
  p.hdr.network = network;
  p.hdr.opcode = host::opcode_of(host::kUd, host::kSendOnly);
  p.hdr.dest_qpn = qpn;
  p.hdr.src_qpn = qpn;
  p.deth = host::Deth{qkey, qpn};
  p.payload = body;
  p.payload_len = len;
  return host::finish_packet(&p) && links_.send(host, 0, p);
}

bool RemotePath::send_cm_st(int host, const proto::CmMad& m) {
  uint8_t body[proto::kCmMadSize];
  if (proto::encode(m, body, sizeof(body)) != sizeof(body)) return false;
  return send_router_datagram_st(host, proto::kCmQpn, proto::kCmQkey, body, sizeof(body));
}

// A UD datagram: to QPN 1, the connection manager's, or Pingmesh's; else for the local UD QP
// it names, if its address and Q_Key match.
void RemotePath::on_datagram_st(int src_host, const Packet& p) {
  if (p.hdr.dest_qpn == proto::kCmQpn) {
    proto::CmMad m;
    if (p.deth.qkey == proto::kCmQkey && p.payload_len == proto::kCmMadSize &&
        proto::decode(p.payload, p.payload_len, &m))
      m.type == proto::kCmNetAnnounce ? on_network_announce_st(src_host, m)
                                      : cm_.on_mad_st(src_host, m);
    return;
  }
  if (p.hdr.dest_qpn == proto::pingmesh::kPingmeshQpn) return on_probe_st(src_host, p, now_ns());
  if (p.hdr.dest_qpn == host::kRawFrameQpn) {
    if (p.deth.qkey != 0 || p.payload_len < device::kMinRawFrame ||
        p.payload_len > device::kMaxRawFrame)
      return;
    SegmentList frame;
    frame.push(Segment{const_cast<uint8_t*>(p.payload), 0, 0, p.payload_len});
    Executor ex(paths_, now_ns());
    ex.deliver_frame_st(p.hdr.network, nullptr, frame);
    return;
  }
  Qp* dst = nullptr;
  if (p.hdr.dest_qpn != proto::kMulticastQpn) {
    dst = paths_.objects.qp_by_qpn(p.hdr.dest_qpn);
    if (dst == nullptr || dst->type != IBV_QPT_UD || !can_receive(dst->state()) ||
        p.deth.qkey != dst->qkey())
      return;
    const Container* c = dst->owner->container();
    if (p.hdr.network != c->network_id) return;  // another virtual network's: dropped
    if (p.has_grh ? p.grh.dgid != c->gid
                  : (cfg_.link_layer != IBV_LINK_LAYER_INFINIBAND || p.hdr.dlid != c->lid))
      return;
  }
  uint8_t grh[kGrhSize];
  if (p.has_grh)
    build_grh(grh, p.grh.ver_tc_flow, static_cast<uint16_t>(p.payload_len), p.grh.hop_limit,
              p.grh.sgid, p.grh.dgid);
  SegmentList payload;
  if (p.payload_len != 0)
    payload.push(Segment{const_cast<uint8_t*>(p.payload), 0, 0, p.payload_len});
  Origin from;
  from.qpn = p.deth.src_qp;
  from.slid = p.hdr.slid;
  from.solicited = (p.hdr.flags & host::kSolicited) != 0;
  from.has_imm = p.has_imm;
  from.imm = p.imm;
  Executor ex(paths_, now_ns());
  if (dst == nullptr) {  // to a group: its members here, in the sender's network
    ex.deliver_multicast_st(p.hdr.network, p.has_grh ? &p.grh.dgid : nullptr, p.hdr.dlid,
                            p.deth.qkey, payload, p.has_grh ? grh : nullptr, from);
    return;
  }
  ex.deliver_ud_st(dst, payload, p.has_grh ? grh : nullptr, from);
}

namespace {

// A NET ANNOUNCE of this router's number `id` for tenant/network.
proto::CmMad network_announce(const std::string& tenant, const std::string& network, uint32_t id) {
  proto::CmMad m;
  m.type = proto::kCmNetAnnounce;
  std::memcpy(m.tenant.data(), tenant.data(), std::min(tenant.size(), m.tenant.size() - 1));
  std::memcpy(m.network.data(), network.data(), std::min(network.size(), m.network.size() - 1));
  m.status = static_cast<int32_t>(id);
  return m;
}

}  // namespace

void RemotePath::announce_network_st(const std::string& tenant, const std::string& network,
                                     uint32_t id) {
  const proto::CmMad m = network_announce(tenant, network, id);
  for (int h = 0; h < static_cast<int>(dir_->hosts().size()); ++h) {
    // A host that cannot take it now hears everything again when it next speaks to us.
    if (h != dir_->self() && !send_cm_st(h, m)) told_[static_cast<size_t>(h)] = false;
  }
}

void RemotePath::announce_all_st(int host) {
  told_[static_cast<size_t>(host)] = true;
  networks_.for_each([&](const std::string& tenant, const std::string& network, uint32_t id) {
    if (!send_cm_st(host, network_announce(tenant, network, id)))
      told_[static_cast<size_t>(host)] = false;
  });
}

void RemotePath::on_network_announce_st(int host, const proto::CmMad& m) {
  if (m.status <= 0) return;
  const std::string tenant(m.tenant.data(), strnlen(m.tenant.data(), m.tenant.size()));
  const std::string network(m.network.data(), strnlen(m.network.data(), m.network.size()));
  peer_networks_[static_cast<size_t>(host)][networks_.number(tenant, network)] =
      static_cast<uint32_t>(m.status);
}

uint32_t RemotePath::peer_network(int host, const Container* c) const {
  if (host < 0) return 0;
  const auto& ids = peer_networks_[static_cast<size_t>(host)];
  auto it = ids.find(c->network_id);
  return it == ids.end() ? 0 : it->second;
}

void RemotePath::on_packet(int src_host, const Packet& p) {
  if (!told_[static_cast<size_t>(src_host)]) announce_all_st(src_host);
  if ((p.hdr.opcode & 0xe0) == host::kUd) return on_datagram_st(src_host, p);
  const uint8_t op = p.hdr.opcode & 0x1f;
  if (op == host::kAcknowledge || op == host::kAtomicAcknowledge ||
      (op >= host::kReadResponseFirst && op <= host::kReadResponseOnly))
    on_response_st(src_host, p);
  else
    on_request_st(src_host, p);
}

void RemotePath::on_response_st(int src_host, const Packet& p) {
  Qp* qp = local_qp_for(src_host, p, /*response=*/true);
  if (qp == nullptr || qp->remote == nullptr) {
    ++counters_.stray_packets_dropped;
    return;
  }
  if (paths_.emulator != nullptr) paths_.emulator->steer_to_qp_st(qp->qpn);
  State& st = *qp->remote;
  st.peer_incarnation = links_.incarnation(src_host);
  const uint64_t now = now_ns();
  if (p.payload_len >= kBulkPacketBytes) keep_bulk_window_open(qp->send_cq, now);
  Executor ex(paths_, now);
  RequesterCalls calls(this, &ex, qp, src_host);
  st.requester.on_response(p.hdr.opcode & 0x1f, p.hdr.psn, p.has_aeth, p.aeth.syndrome,
                           p.atomic_orig, p.payload, p.payload_len, now,
                           requester_limits(qp, cfg_.watchdog_ns), calls);
}

bool RemotePath::read_target_st(Executor* ex, Qp* qp, const Request& r, uint64_t needed,
                                SegmentList* local) {
  SendWork w;
  return reread_st(qp, r.work, &w) && ex->gather_local_st(qp, w, true, local) &&
         needed <= local->total;
}

// A READ response's payload is received straight into the requester's memory when it goes
// there whole: the next response of the oldest READ, landing in one mapped segment. This
// saves the copy out of the link's buffer (the requester's router moves every byte of a
// READ between hosts; docs/PERFORMANCE.md, "Middleware").
uint8_t* RemotePath::payload_destination(int src_host, const Packet& p) {
  if (!host::is_read_response(p.hdr.opcode & 0x1f)) return nullptr;
  Qp* qp = local_qp_for(src_host, p, /*response=*/true);
  if (qp == nullptr || qp->remote == nullptr) return nullptr;
  const Request* r = qp->remote->requester.read_awaiting(p.hdr.psn);
  if (r == nullptr) return nullptr;
  const uint64_t off = uint64_t{r->responses} * host::kMaxSegment;
  Executor ex(paths_, now_ns());
  SegmentList local;
  return read_target_st(&ex, qp, *r, off + p.payload_len, &local)
             ? contiguous_at(local, off, p.payload_len)
             : nullptr;
}

// ---- Responder ----

// The registration an rkey names for an access of `need` to [va, va + len) through dst
// (C9-... 9.7.4.1), or nullptr.
Mr* RemotePath::target_mr(const Responder& rsp, uint32_t rkey, uint64_t va, uint64_t len,
                          uint32_t need) const {
  Mr* mr = paths_.objects.mr_by_key(rkey);
  return remote_access_allowed(mr, rsp.owner, rsp.pd, rsp.qp->qpn, need, va, len) ? mr : nullptr;
}

bool RemotePath::responder_for(Qp* dst, uint32_t srqn, Responder* out) const {
  if (dst->type != IBV_QPT_XRC_RECV) {
    *out = responder_of(dst);
    return true;
  }
  Srq* srq = paths_.objects.srq_by_srqn(srqn);
  if (srq == nullptr || srq->xrc != dst->xrc()) return false;
  *out = srq_responder(dst, srq);
  return true;
}

// A plain ACK is held until flush_st(), at the end of the router's pass: ACKs are cumulative,
// so a QP answered many requests in a pass sends one.
void RemotePath::queue_response_st(Qp* dst, const Response& r) {
  State& st = state(dst);
  if (!st.responder.owe(r)) {
    if (!st.acking) acking_.push_back(dst);
    st.acking = true;
    return;
  }
  send_owed_st(dst);
}

void RemotePath::send_owed_st(Qp* dst) {
  if (!pump_responses_st(dst) &&
      std::find(responding_.begin(), responding_.end(), dst) == responding_.end())
    responding_.push_back(dst);
}

// A held ACK goes before the QP's own next request: the peer completes its send before it
// sees the answer to it (an application that waits for the send's completion event and
// then for the answer's, as perftest's -e does, would otherwise take the answer's event for
// the send's, and its send CQ could overrun).
void RemotePath::release_ack_st(Qp* qp) {
  State& st = state(qp);
  if (!st.acking) return;
  st.acking = false;
  if (st.responder.release_ack()) send_owed_st(qp);
}

bool RemotePath::flush_st() {
  for (Qp* qp : acking_) release_ack_st(qp);
  acking_.clear();
  return links_.flush();
}

// Sends queued responses in order while the link has room. True when the queue emptied.
bool RemotePath::pump_responses_st(Qp* dst) {
  State& st = state(dst);
  const int dest = st.requester_host;
  const uint8_t tclass = link_class(dst, dst->attr.ah_attr);
  while (!st.responder.owed.empty()) {
    Response& r = st.responder.owed.front();
    Packet a;
    a.hdr.dest_qpn = dst->attr.dest_qp_num;
    a.hdr.src_qpn = dst->qpn;
    a.aeth.syndrome = r.syndrome;
    a.aeth.msn = r.msn & rc::kPsnMask;
    if (r.kind != Response::kRead) {
      a.hdr.opcode = host::opcode_of(transport_of(dst), r.kind == Response::kAtomicAck
                                                            ? host::kAtomicAcknowledge
                                                            : host::kAcknowledge);
      a.hdr.psn = r.psn;
      a.atomic_orig = r.orig;
      if (!host::finish_packet(&a) || !links_.send(dest, tclass, a)) return false;
      st.responder.owed.pop_front();
      continue;
    }
    const uint32_t n = packets_for(r.len);
    bool failed = false;
    while (r.sent < n) {
      const uint64_t off = uint64_t{r.sent} * host::kMaxSegment;
      const auto chunk = static_cast<uint32_t>(std::min<uint64_t>(host::kMaxSegment, r.len - off));
      if (links_.room(dest, tclass) < chunk + 256u) return false;
      SegmentList src;
      if (chunk != 0) {
        // The key is looked up again: a registration may go away while its READ is answered.
        Responder rsp;
        Mr* mr = responder_for(dst, r.srqn, &rsp)
                     ? target_mr(rsp, r.rkey, r.va, r.len, IBV_ACCESS_REMOTE_READ)
                     : nullptr;
        if (mr == nullptr || !append_mr_range(&src, *mr, r.va + off, chunk)) {
          failed = true;
          break;
        }
      }
      const uint8_t op = n == 1            ? host::kReadResponseOnly
                         : r.sent == 0     ? host::kReadResponseFirst
                         : r.sent + 1 == n ? host::kReadResponseLast
                                           : host::kReadResponseMiddle;
      a.hdr.opcode = host::opcode_of(transport_of(dst), static_cast<host::Operation>(op));
      a.hdr.psn = psn_add(r.psn, r.sent);
      a.payload_len = chunk;
      PayloadSource piece{&src, 0};
      if (!host::finish_packet(&a)) return false;
      if (!links_.send(dest, tclass, a, fill_payload, &piece)) {
        if (!piece.fault) return false;  // no room: the next pass goes on
        failed = true;
        break;
      }
      if (chunk != 0 && paths_.emulator != nullptr)
        paths_.emulator->touch_memory_st(r.rkey, r.va + off, chunk);
      if (chunk >= kBulkPacketBytes) {
        const uint64_t now = now_ns();
        keep_bulk_window_open(dst->recv_cq, now);
        shm::extend_bulk_window(&dst->direct()->peer_reads_until_ns, now);
      }
      r.sent++;
    }
    if (failed) {  // the rest of the READ: a remote access error at the next PSN
      r = Response{Response::kAck, psn_add(r.psn, r.sent), host::aeth_nak(host::kNakRemoteAccess),
                   r.msn};
      continue;
    }
    st.responder.owed.pop_front();
  }
  return true;
}

void RemotePath::respond_st(Qp* dst, uint32_t psn, uint8_t syndrome) {
  queue_response_st(dst, Response{Response::kAck, psn, syndrome, state(dst).responder.msn()});
}

// Compare-and-swap or fetch-and-add; a duplicate is answered from the cache of results.
void RemotePath::on_atomic_request_st(const Responder& rsp, State& st, const Packet& p,
                                      bool duplicate) {
  Qp* dst = rsp.qp;
  rc::Responder& rs = st.responder;
  const uint32_t psn = p.hdr.psn;
  uint64_t orig = 0;
  if (duplicate) {
    if (rs.recall_atomic(psn, &orig))
      queue_response_st(dst, Response{Response::kAtomicAck, psn, host::aeth_ack(), rs.msn(), orig});
    return;
  }
  Executor ex(paths_, now_ns());
  auto nak = [&](host::NakCode code) {
    respond_st(dst, psn, host::aeth_nak(code));
    ex.to_error_st(dst);
  };
  if ((p.atomic.va & 7) != 0) return nak(host::kNakInvalidRequest);
  Mr* mr = (dst->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)
               ? target_mr(rsp, p.atomic.rkey, p.atomic.va, 8, IBV_ACCESS_REMOTE_ATOMIC)
               : nullptr;
  const bool fetch_add = (p.hdr.opcode & 0x1f) == host::kFetchAdd;
  const AtomicChange change{fetch_add, fetch_add ? p.atomic.swap_add : p.atomic.compare,
                            p.atomic.swap_add};
  // A request the previous process executed but had not taken yet comes again as new: the
  // intent it noted in the kept state answers it (common/atomic_intent.h).
  if (mr == nullptr || atomic_on_mr(*mr, p.atomic.va, change, rs.atomic_intent(), psn, &orig) != 0)
    return nak(host::kNakRemoteAccess);
  if (paths_.emulator != nullptr) paths_.emulator->touch_memory_st(p.atomic.rkey, p.atomic.va, 8);
  rs.remember_atomic(psn, orig);
  rs.accept(psn);
  rs.end_message();
  rs.atomic_intent()->clear();  // a duplicate is answered from the cache now
  queue_response_st(dst, Response{Response::kAtomicAck, psn, host::aeth_ack(), rs.msn(), orig});
}

void RemotePath::on_request_st(int src_host, const Packet& p) {
  Qp* dst = local_qp_for(src_host, p, /*response=*/false);
  // IBA: silently dropped; so is anything from another virtual network, as if nobody were
  // there (the requester retries until RETRY_EXC_ERR).
  if (dst == nullptr || !can_receive(dst->state()) ||
      p.hdr.network != dst->owner->container()->network_id) {
    ++counters_.stray_packets_dropped;
    return;
  }
  if (paths_.emulator != nullptr) paths_.emulator->steer_to_qp_st(dst->qpn);
  State& st = state(dst);
  rc::Responder& rs = st.responder;
  // Answers the link has not taken yet fill the responder's queue: the request goes unseen,
  // and its requester sends it again (a flooding peer is held back, never given memory).
  if (!rs.has_room()) {
    ++counters_.backlogged_requests_dropped;
    return;
  }
  st.requester_host = src_host;
  st.peer_incarnation = links_.incarnation(src_host);
  // What serves the request: an XRC target's is the SRQ its XRCETH names, which must be in
  // the target's domain; one that is not is an invalid request (the target stays usable).
  Responder rsp;
  if (!responder_for(dst, p.xrc_srqn, &rsp)) {
    respond_st(dst, p.hdr.psn, host::aeth_nak(host::kNakInvalidRequest));
    return;
  }
  const uint32_t psn = p.hdr.psn;
  const uint8_t op = p.hdr.opcode & 0x1f;
  // UC: nothing is acknowledged or retransmitted; a message the responder cannot take whole
  // is dropped, and so is one whose packets went missing.
  const bool reliable = (p.hdr.opcode & 0xe0) != host::kUc;
  switch (rs.arrive(psn, op, reliable)) {
    case rc::Responder::Arrival::kNext: break;
    case rc::Responder::Arrival::kIgnore: return;
    case rc::Responder::Arrival::kGap:  // ask for a retransmission from epsn
      respond_st(dst, rs.epsn(), host::aeth_nak(host::kNakPsnSequence));
      return;
    case rc::Responder::Arrival::kDuplicate:  // answered again, never executed twice
      if (op == host::kReadRequest) {
        if (p.reth.dma_length == 0 || target_mr(rsp, p.reth.rkey, p.reth.va, p.reth.dma_length,
                                                IBV_ACCESS_REMOTE_READ) != nullptr)
          queue_response_st(
              dst, Response{Response::kRead, psn, host::aeth_ack(), rs.msn(), 0, p.reth.rkey,
                            p.reth.va, p.reth.dma_length, 0, p.xrc_srqn});
      } else if (op == host::kCompareSwap || op == host::kFetchAdd) {
        on_atomic_request_st(rsp, st, p, /*duplicate=*/true);
      } else if (p.hdr.flags & host::kAckRequest) {
        respond_st(dst, rs.last_psn(), host::aeth_ack());
      }
      return;
  }
  Executor ex(paths_, now_ns());
  // The receive a SEND lands in stays in its queue until the message ends (one from an SRQ is
  // held by the QP meanwhile): each packet takes it again, so the QP keeps no copy of it.
  RecvSource rsrc;
  RecvWork rw;
  bool have_recv = rs.in_send() && ex.take_recv_st(rsp, &rsrc, &rw) &&
                   (rsrc.srq == nullptr || rsrc.held != nullptr);
  auto fail = [&](uint8_t nak, ibv_wc_status recv_status) {
    if (!reliable) return rs.drop_message(psn);  // UC: the message is dropped silently
    if (rs.in_send() && have_recv) {
      ex.consume_recv_st(&rsrc);
      ex.complete_recv_st(rsp, rw, recv_status, IBV_WC_RECV, 0, Origin{p.hdr.src_qpn}, 0);
    }
    rs.abort_message();
    respond_st(dst, psn, host::aeth_nak(static_cast<host::NakCode>(nak)));
    ex.to_error_st(dst);
  };
  // RNR (no receive posted): the requester sends the message again from its first packet.
  // A corrupt queue gets nothing at all.
  auto refuse = [&](uint32_t restart_psn) {
    rs.refuse(restart_psn);
    if (rsrc.ring.has_value()) respond_st(dst, psn, host::aeth_rnr(dst->attr.min_rnr_timer));
  };

  if (!rs.fits_sequence(op)) {
    const bool interrupts = rs.in_message();  // a new request inside a message
    return fail(host::kNakInvalidRequest, interrupts ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_SUCCESS);
  }
  if (op == host::kCompareSwap || op == host::kFetchAdd)
    return on_atomic_request_st(rsp, st, p, /*duplicate=*/false);
  if (op == host::kReadRequest) {
    const uint64_t len = p.reth.dma_length;
    if (!(dst->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) ||
        (len != 0 &&
         target_mr(rsp, p.reth.rkey, p.reth.va, len, IBV_ACCESS_REMOTE_READ) == nullptr))
      return fail(host::kNakRemoteAccess, IBV_WC_SUCCESS);
    rs.accept(psn, packets_for(len));
    rs.end_message();
    queue_response_st(dst, Response{Response::kRead, psn, host::aeth_ack(), rs.msn(), 0,
                                    p.reth.rkey, p.reth.va, len, 0, p.xrc_srqn});
    return;
  }
  if (op == host::kAtomicWrite) {  // one packet; a repeat stores the same bytes again
    uint64_t value = 0;
    if (p.payload_len != proto::kAtomicWriteSize || p.reth.dma_length != proto::kAtomicWriteSize ||
        (p.reth.va & 7) != 0)
      return fail(host::kNakInvalidRequest, IBV_WC_SUCCESS);
    std::memcpy(&value, p.payload, sizeof(value));
    Mr* mr = target_mr(rsp, p.reth.rkey, p.reth.va, sizeof(value), IBV_ACCESS_REMOTE_WRITE);
    if (!(dst->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) || mr == nullptr ||
        atomic_store_on_mr(*mr, p.reth.va, value) != 0)
      return fail(host::kNakRemoteAccess, IBV_WC_SUCCESS);
    rs.accept(psn);
    rs.end_message();
    if (p.hdr.flags & host::kAckRequest) respond_st(dst, psn, host::aeth_ack());
    return;
  }
  if (starts_message(op)) {
    if (is_send(op)) {
      // Tag matching serves senders on this host only (a QP on a TM-SRQ cannot be connected
      // to another host; this refuses a peer that claims it is anyway).
      if (dst->srq != nullptr && dst->srq->tm != nullptr)
        return fail(host::kNakInvalidRequest, IBV_WC_SUCCESS);
      have_recv = ex.take_recv_st(rsp, &rsrc, &rw);
      if (!have_recv) {
        if (!reliable) return fail(0, IBV_WC_SUCCESS);  // UC: no receive, no message
        return refuse(psn);
      }
      // A message of several packets keeps its receive from an SRQ until its last packet:
      // other senders, on this host or another, take the next one meanwhile.
      if (!ends_message(op)) ex.hold_recv_st(rsp, &rsrc, rw);
    } else {
      // C9-... 9.7.4.1: the QP's access rights and the rkey, for the whole message.
      const uint64_t len = p.reth.dma_length;
      if (!(dst->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
          (len != 0 &&
           target_mr(rsp, p.reth.rkey, p.reth.va, len, IBV_ACCESS_REMOTE_WRITE) == nullptr))
        return fail(host::kNakRemoteAccess, IBV_WC_SUCCESS);
      rs.rkey = p.reth.rkey;
      rs.va = p.reth.va;
      rs.dma_length = len;
    }
    rs.begin_message(op, psn);
  }

  // Place the payload.
  const Segment src{const_cast<uint8_t*>(p.payload), 0, 0, p.payload_len};
  if (rs.in_send()) {
    SegmentList target;
    if (!have_recv) return fail(host::kNakRemoteOperational, IBV_WC_SUCCESS);  // its queue broke
    if (!ex.resolve_sges_st(rw.sge, rw.hdr.num_sge, rsp.owner, rsrc.pd, true, &target))
      return fail(host::kNakRemoteOperational, IBV_WC_LOC_PROT_ERR);
    if (rs.offset + p.payload_len > target.total)
      return fail(host::kNakInvalidRequest, IBV_WC_LOC_LEN_ERR);
    if (p.payload_len != 0 &&
        copy_spans(&src, 1, 0, target.seg, target.count, rs.offset, p.payload_len) != 0)
      return fail(host::kNakRemoteOperational, IBV_WC_LOC_PROT_ERR);
  } else {
    if (rs.offset + p.payload_len > rs.dma_length)
      return fail(host::kNakInvalidRequest, IBV_WC_SUCCESS);
    if (p.payload_len != 0) {
      // Looked up again: the registration may have gone since the first packet.
      Mr* mr = target_mr(rsp, rs.rkey, rs.va, rs.dma_length, IBV_ACCESS_REMOTE_WRITE);
      SegmentList target;
      if (mr == nullptr || !append_mr_range(&target, *mr, rs.va + rs.offset, p.payload_len) ||
          copy_spans(&src, 1, 0, target.seg, target.count, 0, p.payload_len) != 0)
        return fail(host::kNakRemoteAccess, IBV_WC_SUCCESS);
      if (paths_.emulator != nullptr)
        paths_.emulator->touch_memory_st(rs.rkey, rs.va + rs.offset, p.payload_len);
    }
  }
  rs.offset += p.payload_len;

  if (ends_message(op)) {
    if (is_write(op) && has_imm(op) && !(have_recv = ex.take_recv_st(rsp, &rsrc, &rw))) {
      if (!reliable) return fail(0, IBV_WC_SUCCESS);
      return refuse(rs.message_psn());  // the whole WRITE goes again
    }
    // The window a SEND with Invalidate names must be the responder's (IBTA 10.6.7.2.3).
    if (has_invalidate(op) && !invalidate_remotely(paths_.objects, dst, p.imm))
      return fail(host::kNakInvalidRequest, IBV_WC_REM_INV_REQ_ERR);
    if (is_send(op) || has_imm(op)) {
      Origin from{p.hdr.src_qpn, p.hdr.slid, p.hdr.sl, (p.hdr.flags & host::kSolicited) != 0,
                  has_imm(op),   p.imm};
      uint32_t flags = 0;
      if (has_imm(op) || has_invalidate(op))
        flags = has_imm(op) ? IBV_WC_WITH_IMM : IBV_WC_WITH_INV;
      const ibv_wc_opcode wc_op = is_send(op) ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM;
      const shm::Cqe c =
          recv_cqe(dst, rw, IBV_WC_SUCCESS, wc_op, static_cast<uint32_t>(rs.offset), from, flags);
      // From the QP's own receive queue, or from its SRQ if a record keeps the receive (not
      // an XRC SRQ's: its CQ is not the QP's, and XRC is not restored).
      const uint32_t srq_record = rsrc.srq_record();
      if (rsrc.srq == nullptr ? rsrc.ring.has_value()
                              : srq_record != SrqRecords::kNone && rsrc.srq->xrc == nullptr) {
        RemoteQpState::CompletionUnderWay& rec = st.receiving;
        rec.message_psn = rs.message_psn();
        rec.end_psn = psn;
        rec.msn = rs.msn();
        rec.solicited = from.solicited;
        rec.srq_record = srq_record;
        record_completion(&rec, rsp.cq, c, rsrc.srq == nullptr ? rsrc.ring->tail() : 0);
      }
      ex.consume_recv_st(&rsrc);
      // Counted in the responder's rx counters, as every receive completion is.
      ex.post_recv_completion_st(rsp, c, from.solicited);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the PSN moves after the entry
    }
    // Accepted before it ends: a process that dies in between continues after it.
    rs.accept(psn);
    rs.end_message();
  } else {
    rs.accept(psn);
  }
  if (reliable && (p.hdr.flags & host::kAckRequest)) respond_st(dst, psn, host::aeth_ack());
}

// What was in flight between us and that host may be gone (our connection broke or stalled,
// or the host replaced its connection to us): every QP waiting for answers from it resends
// as soon as the connection may be (re)opened, instead of at its ACK timeout. If nobody
// listens there any more, reopening it is refused and on_peer_gone fails them.
void RemotePath::on_link_lost(int host) {
  cm_.on_host_lost_st(host, true);  // its connection-management MADs in flight are lost
  const uint64_t at = std::max(links_.reconnect_at_ns(host), now_ns());
  for (auto& [qp, st] : states_) {
    if (peer_host(qp) == host && st->requester.link_lost(at)) paths_.scheduler.activate(qp);
  }
  // It may be a router that restarted with its state but without our numbers: it hears
  // them again when it next speaks to us.
  told_[static_cast<size_t>(host)] = false;
}

// A restarted router knows none of the QPs that talked to its former incarnation; QPs that
// have not heard from it yet may be new ones talking to the new incarnation.
void RemotePath::on_peer_restarted(int host) {
  spdlog::info("router of {} restarted", dir_->hosts()[static_cast<size_t>(host)].name);
  peer_networks_[static_cast<size_t>(host)].clear();  // its numbers were its old incarnation's
  told_[static_cast<size_t>(host)] = false;
  cm_.on_host_lost_st(host, false);
  const uint32_t now_incarnation = links_.incarnation(host);
  fail_peer_qps_st(host, "restarted", [now_incarnation](uint32_t incarnation, bool) {
    return incarnation != 0 && incarnation != now_incarnation;
  });
}

// The peer's router answers: what waited for the link (on_link_lost) goes now, not at the
// reconnect time the link's backoff had set (a router that restarted dialled us first, and
// we dialled it back at once).
void RemotePath::on_link_up(int host) {
  refused_since_[static_cast<size_t>(host)] = 0;
  const uint64_t now = now_ns();
  for (auto& [qp, st] : states_) {
    if (peer_host(qp) == host && st->requester.link_back(now)) paths_.scheduler.activate(qp);
  }
}

// Nobody listens at the host: whatever QP talked to its router, or waits for an answer from
// it, has lost its peer, unless the router comes back with its state within
// RouterConfig::peer_restart_grace_ns (meanwhile the QPs' own timers go on: go-back-N once
// it answers).
void RemotePath::on_peer_gone(int host) {
  const uint64_t now = now_ns();
  uint64_t& since = refused_since_[static_cast<size_t>(host)];
  if (since == 0) since = now;
  if (now - since < cfg_.peer_restart_grace_ns) return;
  peer_networks_[static_cast<size_t>(host)].clear();
  told_[static_cast<size_t>(host)] = false;
  cm_.on_host_lost_st(host, false);
  fail_peer_qps_st(host, "is not running", [](uint32_t incarnation, bool outstanding) {
    return incarnation != 0 || outstanding;
  });
}

// Each lost QP fails now rather than after its retry budget: the oldest outstanding request
// completes with RETRY_EXC_ERR (what the requester reports when its peer stops answering),
// a QP with nothing outstanding gets IBV_EVENT_QP_FATAL, and ERR flushes the rest. UC and UD
// keep their unreliable semantics and are left alone.
template <class Lost>
void RemotePath::fail_peer_qps_st(int host, const char* why, Lost lost) {
  std::vector<Qp*> failed;
  paths_.objects.for_each_qp([&](Qp* qp) {
    const ibv_qp_state s = qp->state();
    if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_SEND) || s < IBV_QPS_RTR ||
        s == IBV_QPS_ERR || peer_host(qp) != host)
      return;
    const State* st = qp->remote;
    const uint32_t incarnation =
        st != nullptr ? st->peer_incarnation : qp->parked_remote.peer_incarnation;
    if (lost(incarnation, st != nullptr && !st->requester.idle())) failed.push_back(qp);
  });
  Executor ex(paths_, now_ns());
  for (Qp* qp : failed) {
    RequesterCalls calls(this, &ex, qp, host);
    if (!state(qp).requester.abandon_oldest(IBV_WC_RETRY_EXC_ERR, calls))
      qp->owner->post_async_event(IBV_EVENT_QP_FATAL, qp->handle);
    ex.to_error_st(qp);
  }
  if (failed.empty()) return;
  counters_.peer_qps_failed += failed.size();
  spdlog::warn("router of {} {}: {} QP(s) that used it failed",
               dir_->hosts()[static_cast<size_t>(host)].name, why, failed.size());
}

}  // namespace wharf::router
