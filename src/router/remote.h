// The host-to-host engine (issue #3): RC between a QP on this host and one on another,
// carried as IBA-style packets (proto/host_wire.h) over the shared host links
// (links/host_links.h).
//
// The transport's rules are rc/'s pure state machines, one pair per QP: rc::Requester (the
// window of unacknowledged requests, go-back-N, RNR waits, READ and atomic responses) and
// rc::Responder (expected PSN, duplicates, the atomic cache, the answers owed). This file
// binds them to the router: it turns work requests into packets, executes requests against
// receive queues and registered memory with the same checks as the local path, and sends
// the answers in PSN order while the link has room (READ responses are paced by it).
//
// UC uses the same packets without acknowledgements: the requester completes at once, the
// responder drops a message it cannot place or whose packets it misses. UD datagrams are one
// packet each, delivered or dropped silently.
//
// Every QP's state lives in a file that outlives the process (router/kept_remote_states.h): a
// router killed or upgraded is continued by the next process under the same incarnation, and
// its peers go back N as after a link cut. A peer router that comes back as a new incarnation
// (it lost its state), or that refuses connections for longer than
// RouterConfig::peer_restart_grace_ns, took its QPs' state with it: the RC QPs that talked to
// it fail then (RETRY_EXC_ERR for the oldest outstanding request, else IBV_EVENT_QP_FATAL),
// not after their retry budget; QPs connected after its restart work.
//
// The watchdog (RouterConfig::watchdog_ns) moves to ERR a QP whose peer has refused its work
// (RNR) for longer than the limit, and says so in the log and the router's counters.
//
// It works with the parts of the router a PathContext names (router/executor.h), the rdma_cm
// (whose MADs it carries), the network numbers it announces, and the router's counters;
// never with the Router itself.
//
// Pingmesh (pingmesh/mesh.h, router/remote_pingmesh.cc): every interval it probes every other
// router with a datagram to that router's QPN kPingmeshQpn, and answers theirs.
//
// Status: RC, UC, UD, per-class connections (DSCP), the watchdog, Pingmesh.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "links/cluster.h"
#include "links/host_links.h"
#include "pingmesh/mesh.h"
#include "proto/cm_messages.h"
#include "proto/host_wire.h"
#include "rc/requester.h"
#include "rc/responder.h"
#include "router/executor.h"
#include "router/express.h"
#include "router/kept_remote_states.h"
#include "router/network_numbers.h"
#include "router/remote_qp_state.h"

namespace wharf::router {

class CmManager;
struct RouterConfig;
struct RouterCounters;

class RemotePath final : public links::HostLinks::Handler {
 public:
  // dir: the cluster, this host among its hosts. Every reference outlives the engine.
  RemotePath(const PathContext& paths, const RouterConfig& cfg, RouterCounters& counters,
             CmManager& cm, NetworkNumbers& networks, std::unique_ptr<links::StaticCluster> dir);
  ~RemotePath() override;

  // Listens for host links and, with RouterConfig::express, for express lines. 0 or an errno.
  int start();
  int epoll_fd() const { return links_.epoll_fd(); }
  // Peers refused at the links' authentication since start (links::HostLinks).
  uint64_t refused_peers() const { return links_.refused_peers(); }
  // Connections closed for a record that failed its check (--link-security encrypt).
  uint64_t refused_records() const { return links_.refused_records(); }
  ExpressBroker& express() { return express_; }
  const ExpressBroker& express() const { return express_; }
  const links::AddressDirectory& directory() const { return *dir_; }
  const links::HostLinks& links() const { return links_; }
  // What Pingmesh knows of the paths to the other routers; null when it does not probe.
  const pingmesh::Mesh* pingmesh() const { return pingmesh_.get(); }
  // Pingmesh within tenants' virtual networks (RouterConfig::pingmesh_networks).
  struct NetworkMesh {
    std::string tenant, network;
    uint32_t number;  // this router's number for it
    std::unique_ptr<pingmesh::Mesh> mesh;
  };
  const std::vector<NetworkMesh>& network_meshes() const { return network_meshes_; }
  // fn(tenant, network, mesh, peer) for each peer Pingmesh has figures for: every other router
  // in the routers' own mesh (tenant and network ""), then (with_networks) in each tenant
  // network's mesh the routers probed within it. Nothing when Pingmesh is off.
  using PingmeshPeer = std::function<void(const std::string& tenant, const std::string& network,
                                          const pingmesh::Mesh& mesh, int peer)>;
  void for_each_pingmesh_peer(bool with_networks, const PingmeshPeer& fn) const;

  // Index of the host serving address vector `ah`, as seen by a QP of container `from`, when
  // that is another host, else -1. A GID ::ffff:<vIP> goes where the orchestrator placed the
  // container with that vIP in from's network (set_placement_st), else to the host whose
  // subnet holds it (the cluster file); a LID to the host whose range holds it.
  int host_for(const proto::AhAttr& ah, const Container* from) const;
  // The same for the peer of a connected (RC or UC) QP; cached in the QP until its AV or a
  // placement changes.
  int peer_host(const Qp* qp) const;
  // The orchestrator placed the container with vIP `vip` of this router's network
  // `network_id` on host `host` ("": it was deleted, or its host is not in the cluster file).
  void set_placement_st(uint32_t network_id, uint32_t vip, const std::string& host);
  // UD: sends one datagram of `qp` to another host (unreliable: dropped when the link is full).
  void send_datagram_st(Qp* qp, const SendWork& w, const SegmentList& local,
                        const proto::AhAttr& ah, uint32_t qkey, int host);
  // A datagram to a multicast group, sent to every other host (each delivers it to the
  // group's members it serves).
  void flood_datagram_st(Qp* qp, const SendWork& w, const SegmentList& local,
                         const proto::AhAttr& ah, uint32_t qkey);

  // RAW_PACKET: a frame `qp` sent, to every other host (a virtual network's Ethernet segment
  // spans the hosts; each router gives it to its RAW_PACKET QPs whose rules take it).
  // Unreliable, as a wire is: dropped on a link that is full.
  void flood_frame_st(Qp* qp, const SegmentList& frame);

  // Connection management: one CmMad to `host`'s router, as a UD datagram to its QPN 1
  // (proto/cm_messages.h). False when the link cannot take it now.
  bool send_cm_st(int host, const proto::CmMad& m);

  // Isolation between hosts: every request packet names the sender's virtual network by the
  // receiving router's number for it (PacketHeader::network), which that router announced;
  // the receiver drops a request whose number is not its destination's network's. Announces
  // this router's number for tenant/network to every other host.
  void announce_network_st(const std::string& tenant, const std::string& network, uint32_t id);

  // Requester work of an RTS QP whose peer is on `host`. True if anything was done.
  bool process_requester_st(Executor* ex, Qp* qp, int host, uint64_t now);
  // Completes qp's outstanding work with WR_FLUSH_ERR (the QP is in ERR).
  bool flush_st(Qp* qp);
  // Drops all state of qp (reset or destroyed).
  void forget_st(Qp* qp);
  // qp was restored under its old number after this router's restart (a resumed session):
  // it continues from where the previous process left its state, if it left any (its
  // replayed ModifyQp requests then leave that alone). True if it did.
  bool restore_st(Qp* qp);
  // Moves packets on the host links and sets up express lines. True if anything moved.
  // `router_busy`: the router's previous pass did work. A look at the links that finds
  // nothing (an epoll_wait) costs about as much as a pass of local work, so while other work
  // keeps the router busy and the links were quiet they are looked at only every
  // kQuietLinkLookNs; otherwise on every pass. `express_input`: the broker's epoll fd was
  // readable (the broker is looked at only then, or while it has lines being set up).
  bool poll_st(bool router_busy, bool express_input);
  // Sends the ACKs held back in this pass, then writes what was queued for other hosts since
  // the last poll or flush. True if anything was written.
  bool flush_st();
  // Earliest retransmission, reconnect or parking-sweep deadline, 0 if none.
  uint64_t next_deadline() const;

  // links::HostLinks::Handler
  void on_packet(int host, const proto::host::Packet& p) override;
  uint8_t* payload_destination(int host, const proto::host::Packet& p) override;
  void on_link_lost(int host) override;
  void on_peer_restarted(int host) override;
  void on_peer_gone(int host) override;
  void on_link_up(int host) override;

 private:
  using State = RemoteQpState;
  using Request = rc::Request<RemoteQpState::Work>;
  using Response = rc::Response;
  class RequesterCalls;  // the requester's port: remote.cc
  // A work request as the issue loop just copied it out of the send ring and gathered its
  // local memory: its first transmission uses these rather than doing both again.
  struct Fresh {
    uint32_t ring_index;
    const SendWork* w;
    const SegmentList* local;
  };

  // qp's engine state, made (or continued from where it was parked) if it has none.
  State& state(Qp* qp);
  // A QP that was quiet for a whole sweep period (kParkSweepNs) and is quiescent (nothing
  // outstanding, owed or in progress) gives back its state; what continues it stays in
  // Qp::parked_remote (a few bytes). An idle connected QP then costs the engine nothing, as
  // SRC keeps state only for active connections. Busy QPs are never parked, so the hot path
  // does not allocate.
  void park_quiet_st();
  bool parkable(const Qp* qp, const State& st) const;
  // The addressing of a packet qp sends along address vector ah to QP dest_qpn.
  proto::host::PacketHeader request_header(const Qp* qp, const proto::AhAttr& ah, uint32_t dest_qpn,
                                           int host) const;
  bool transmit_st(Executor* ex, Qp* qp, int host, const Request& o, const Fresh* fresh);
  bool send_unsent_st(Executor* ex, Qp* qp, int host, uint64_t now,
                      const rc::RequesterLimits& limits);
  // UC: sends what is left of the message the link had no room for; completes it once all
  // went. True while some of it still waits, or when the QP just failed: nothing new goes.
  bool send_uc_tail_st(Executor* ex, Qp* qp, int host, bool* did);
  // `fresh`: o's work request as just issued, or null (it is copied out of the ring again).
  bool send_request_st(Executor* ex, Qp* qp, int host, const Request& o, uint32_t* psn,
                       const Fresh* fresh = nullptr);
  bool send_message_st(Executor* ex, Qp* qp, int host, const Request& o, uint32_t* psn,
                       const Fresh* fresh);
  bool pump_responses_st(Qp* dst);
  void queue_response_st(Qp* dst, const Response& r);
  // Sends dst's owed answers while its link has room; the rest wait in responding_.
  void send_owed_st(Qp* dst);
  // Sends the ACK qp holds back, if it holds one.
  void release_ack_st(Qp* qp);
  // The registration rkey names if responder rsp may reach [va, va+len) with `need`.
  Mr* target_mr(const Responder& rsp, uint32_t rkey, uint64_t va, uint64_t len,
                uint32_t need) const;
  // What serves a request to dst: its own queue, or for an XRC target the SRQ `srqn` of its
  // domain (false when there is none).
  bool responder_for(Qp* dst, uint32_t srqn, Responder* out) const;
  // A compare-and-swap or fetch-and-add to rsp.qp, served by rsp.
  void on_atomic_request_st(const Responder& rsp, State& st, const proto::host::Packet& p,
                            bool duplicate);
  // Completes o, the oldest of qp's work requests, and releases its slot of the send ring.
  void complete_send_st(Qp* qp, const RemoteQpState::Work& o, ibv_wc_status status);
  void on_response_st(int host, const proto::host::Packet& p);
  void on_request_st(int host, const proto::host::Packet& p);
  void on_datagram_st(int src_host, const proto::host::Packet& p);
  void on_network_announce_st(int host, const proto::CmMad& m);
  // A datagram of the router's own (CM MAD, Pingmesh probe) to QPN `qpn` of `host`'s router,
  // on traffic class 0. False when the link cannot take it now.
  // `network`: the packet's PacketHeader.network (0: none).
  bool send_router_datagram_st(int host, uint32_t qpn, uint32_t qkey, const uint8_t* body,
                               uint32_t len, uint32_t network = 0);
  // Pingmesh: sends the round of probes that is due (true if one was).
  bool probe_peers_st(uint64_t now);
  // Pingmesh: a probe from `host` (answered) or an answer to one of ours.
  void on_probe_st(int host, const proto::host::Packet& p, uint64_t now);
  // Tells `host` every network this router has numbered (the first time we hear from it).
  void announce_all_st(int host);
  // `host`'s number for container c's network; 0 (dropped there) until announced.
  uint32_t peer_network(int host, const Container* c) const;
  void respond_st(Qp* dst, uint32_t psn, uint8_t syndrome);
  Qp* local_qp_for(int host, const proto::host::Packet& p, bool response) const;
  // Copies the work request of o out of qp's send ring again into *w. False when the
  // application rewrote it since it was issued (malformed, or another opcode).
  static bool reread_st(Qp* qp, const RemoteQpState::Work& o, SendWork* w);
  // The local memory READ r's responses land in (its WQE's segments, of at least `needed`
  // bytes). False: the WQE was rewritten, or its memory is gone or shorter.
  static bool read_target_st(Executor* ex, Qp* qp, const Request& r, uint64_t needed,
                             SegmentList* local);
  // Fails the RC QPs connected to `host` that `lost(peer_incarnation, outstanding)` says lost
  // their peer (router log: `why`): the incarnation of the peer's router the QP last heard
  // from (0: none), and whether it waits for answers.
  template <class Lost>
  void fail_peer_qps_st(int host, const char* why, Lost lost);

  const PathContext& paths_;
  const RouterConfig& cfg_;
  RouterCounters& counters_;
  CmManager& cm_;
  NetworkNumbers& networks_;
  std::unique_ptr<links::StaticCluster> dir_;
  std::string tls_error_;                // why the LinkTls the config asks for cannot be had
  std::unique_ptr<links::LinkTls> tls_;  // nullptr: links not authenticated
  // Where every QP's state lives (before links_: it names the incarnation they announce).
  std::unique_ptr<KeptRemoteStates> kept_;
  links::HostLinks links_;
  ExpressBroker express_;
  std::unique_ptr<pingmesh::Mesh> pingmesh_;  // from start(), with a Pingmesh interval
  std::vector<NetworkMesh> network_meshes_;   // likewise
  // The last look at the host links (CLOCK_MONOTONIC ns) and whether it moved anything (read
  // or wrote).
  static constexpr uint64_t kQuietLinkLookNs = 5000;
  uint64_t links_looked_ns_ = 0;
  bool links_busy_ = false;
  static constexpr uint64_t kParkSweepNs = 1'000'000'000;
  static constexpr size_t kTrimAfterParking = 256;
  uint64_t swept_ns_ = 0;  // the last parking sweep
  // Every QP's state, made by state() and dropped by forget_st() or parking; Qp::remote
  // points at it meanwhile. In kept_'s slots, or on the heap once they are all taken.
  std::unordered_map<Qp*, State*> states_;
  void drop_state(State* st);
  // Since when each host has refused our connections (0: it has not, or it answered since).
  std::vector<uint64_t> refused_since_;
  std::vector<Qp*> responding_;  // responders whose response queue is not empty
  std::vector<Qp*> acking_;      // responders holding back an ACK until flush_st()
  std::vector<uint8_t> bounce_;  // one packet's payload
  // Per host: its numbers for our networks (by our number), and whether it has heard ours in
  // its current incarnation.
  std::vector<std::unordered_map<uint32_t, uint32_t>> peer_networks_;
  std::vector<bool> told_;
  // The orchestrator's placements: host index by (network number << 32 | vIP).
  std::unordered_map<uint64_t, int> placements_;
  // Changes with placements_: cached peer hosts are stale (Qp::peer_host_epoch; 16 bits, so
  // that a QP keeps 4 bytes of cache).
  uint16_t placement_epoch_ = 1;
};

}  // namespace wharf::router
