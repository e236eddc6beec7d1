// The router as rdma_cm's connection manager (the kernel's cma/ib_cm for our containers):
// ports per container and port space, listeners, and the IB CM's exchange between the two ids
// of a connection: REQ -> REP -> RTU, REJ before the RTU, DREQ, and SIDR REQ/REP for UD.
//
// The two ids talk only through CmMads (proto/cm_messages.h), addressed by host and
// communication ID: handed over in place when both are on this router, sent to QPN 1 of the
// other router over the host links (router/remote.h) when not. Addresses on another host are
// resolved by asking that host's router (AddrQuery), which answers only for containers of the
// asker's tenant and network. Every change reaches the libraries as CmEventMsg datagrams on
// their event channels.
//
// It works with the router's configuration, its QPs (HostObjects) and a CmEnvironment: the
// containers, the hosts and event channels around it. The Router is one; tests make others
// (a network that loses MADs, say).
//
// Threading: router thread only (as everything the router holds).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "proto/cm_messages.h"
#include "router/cm_objects.h"
#include "router/kept_cm_ids.h"

namespace wharf::router {

class HostObjects;
struct RouterConfig;

// What the connection manager needs from around it.
class CmEnvironment {
 public:
  virtual ~CmEnvironment() = default;
  // The registered container of this host in virtual network tenant/network that holds vIP
  // `vip` (host order), or nullptr.
  virtual const Container* container_with_vip(uint32_t vip, const std::string& tenant,
                                              const std::string& network) const = 0;
  // The index of the other host serving address vector `ah` for container `from`; -1 when
  // none does (or there is no cluster).
  virtual int cm_host_for(const proto::AhAttr& ah, const Container* from) const = 0;
  // Sends one MAD to another host's router. False when it cannot go now (no cluster, no
  // link, the link's queue full).
  virtual bool send_cm_st(int host, const proto::CmMad& m) = 0;
  // ch's socket is full: call CmManager::flush_st(ch) once it has room.
  virtual void watch_cm_channel_st(CmChannel* ch) = 0;
  // Whether `host` is one of the cluster's other hosts (or kThisHost).
  virtual bool cm_host_known(int host) const = 0;
};

class CmManager {
 public:
  // Every reference outlives the manager. Opens the file of kept ids (RouterConfig::
  // kept_cm_path), taking what a previous process left there.
  CmManager(const RouterConfig& cfg, const HostObjects& objects, CmEnvironment& env);

  // A new id of a session: gets its communication ID.
  void add_st(CmId* id);
  // Each returns 0 or a positive errno for the request's reply; events follow on channels.
  int bind_st(CmId* id, const CmAddress& addr);
  int resolve_addr_st(CmId* id, const CmAddress* src, const CmAddress& dst, uint32_t timeout_ms);
  int resolve_route_st(CmId* id);
  int listen_st(CmId* id, uint32_t backlog);
  // rdma_join_multicast: id (bound or resolved) joins the group of multicast address `group`;
  // MULTICAST_JOIN reports the group's MGID, MLID, QPN 0xffffff and Q_Key (the library then
  // attaches the id's QP). EINVAL for an unbound id or a non-multicast address.
  int join_multicast_st(CmId* id, const CmAddress& group);
  int connect_st(CmId* id, const proto::CmConnParam& p);
  int accept_st(CmId* id, const proto::CmConnParam& p);
  int reject_st(CmId* id, const uint8_t* data, uint8_t len);
  int establish_st(CmId* id);
  int disconnect_st(CmId* id);
  int set_option_st(CmId* id, uint32_t option, uint32_t value);
  // Before the id is freed: tells its peer and its pending requesters, leaves the port table.
  void destroy_st(CmId* id);

  // The ids a previous router process kept (router/kept_cm_ids.h).
  KeptCmIds& kept() { return kept_; }
  // Continues id (made by its session, under the handle and with the channel the record
  // names) as the record `k` of `slot` left it: its number, addresses, port and peer. An id
  // the old process was connecting, resolving or accepting with fails (UNREACHABLE, ADDR_ERROR,
  // the peer a REJ), as its wait would have. 0, or EINVAL for a record that cannot be used,
  // EADDRINUSE when its number or port was taken meanwhile.
  int restore_st(CmId* id, const KeptCmId& k, uint32_t slot);
  // Writes the ids changed since the last call to the kept file (after each loop turn).
  void keep_changed_st();
  // The router is stopping: with a kept file, it stops as a crashed one would, so that the
  // next process continues every id (the file keeps them; no peer is told, no event sent,
  // as for the sessions' QPs). Called before the sessions end; destroy_st does nothing after.
  void detach_st();

  // A CmMad from host `from` (kThisHost: handed over in place). Hostile input: checked here.
  void on_mad_st(int from, const proto::CmMad& m);
  // `host`'s router is gone or restarted: its ids are. Handshakes with it fail, connections
  // to it are disconnected. If only the link broke (`link_only`), MADs in flight are lost:
  // handshakes fail, connections stay (their QPs recover by themselves).
  void on_host_lost_st(int host, bool link_only);

  // Writes what a channel holds back once its socket has room; true when it is empty.
  bool flush_st(CmChannel* ch);

  // Fails the waits whose time is up (cm_timeout_ns, or the application's address resolution
  // timeout): the waiting side gets UNREACHABLE or ADDR_ERROR with -ETIMEDOUT, its peer a REJ.
  void expire_st(uint64_t now);
  // The earliest such deadline (CLOCK_MONOTONIC ns), 0 if none.
  uint64_t next_deadline() const { return deadlines_.empty() ? 0 : deadlines_.begin()->first; }

 private:
  using PortKey = std::tuple<const Container*, uint16_t, uint16_t>;  // container, ps, port

  const Container* container_of(const CmId* id) const;
  // The container of this host that holds `ip` within tenant/network, or nullptr.
  const Container* holder_st(const Container* self, const std::string& tenant,
                             const std::string& network, const CmAddress& ip) const;
  bool may_bind_ip(const CmId* id, const CmAddress& a) const;
  int check_port(const CmId* id, const CmAddress& a, bool reuse) const;
  int take_port(CmId* id, CmAddress a);
  void release_port(CmId* id);
  CmId* find_listener(const Container* c, uint16_t ps, const CmAddress& dst) const;
  bool owns_qp(const CmId* id, uint32_t qpn) const;
  // The host of the router that serves `ip` for container `asker` (kThisHost for this one),
  // or -2 if none does.
  int host_of(const CmAddress& ip, const Container* asker) const;

  // MADs: made from an id, sent to its peer, or answered to a sender.
  proto::CmMad mad_from(const CmId* id, uint8_t type) const;
  void send_st(int host, const proto::CmMad& m);
  void send_to_peer_st(CmId* id, proto::CmMad m);
  void answer_st(int host, const proto::CmMad& to, uint8_t type, int32_t status);
  CmId* receiver_st(int from, const proto::CmMad& m) const;
  // The passive id made for the REQ that comm on host `from` sent, if it is still there.
  CmId* made_for_request(int from, uint32_t comm) const;
  void on_request_st(int from, const proto::CmMad& m);
  void on_addr_query_st(int from, const proto::CmMad& m);
  // Ends whatever the id was doing with its peer and reports it: REJECTED / UNREACHABLE
  // before ESTABLISHED, DISCONNECTED after.
  void lose_peer_st(CmId* id, int32_t reject_reason, const uint8_t* data, uint8_t len);
  void unlink_request(CmId* id);
  // The id waits in its current state until now + ns at most.
  void wait_st(CmId* id, uint64_t ns);
  // id may have changed: it is written to the kept file after this loop turn. Each public
  // method that can change an id calls it on entry, whatever it then returns: one rule with no
  // return path to miss; an id marked but unchanged is rewritten as it was.
  void changed(CmId* id);
  KeptCmId record_of(const CmId* id) const;
  static std::optional<CmAddress> kept_address(const proto::CmAddr& a);

  // Event plumbing.
  proto::CmEventMsg event_for(const CmId* id, uint32_t type, int32_t status) const;
  void post_st(CmId* id, const proto::CmEventMsg& ev);
  void post_st(CmId* id, uint32_t type, int32_t status);
  // The MGID of multicast address `a` for id (proto/multicast.h), or nullopt if `a` is not one.
  std::optional<proto::Gid> group_gid(const CmId* id, const CmAddress& a) const;

  const RouterConfig& cfg_;
  const HostObjects& objects_;
  CmEnvironment& env_;
  std::map<PortKey, std::vector<CmId*>> ports_;
  std::unordered_map<uint32_t, CmId*> by_comm_;
  // Passive ids by the REQ that made them: requester's host << 32 | requester's comm.
  std::unordered_map<uint64_t, CmId*> by_request_;
  std::multimap<uint64_t, uint32_t> deadlines_;  // deadline -> comm; stale entries are skipped
  KeptCmIds kept_;
  std::vector<CmId*> dirty_;  // ids changed since keep_changed_st
  bool detached_ = false;
  uint32_t next_comm_ = 1;
  uint32_t next_ephemeral_ = 0;
};

}  // namespace wharf::router
