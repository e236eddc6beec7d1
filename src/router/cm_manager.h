// The router as rdma_cm's connection manager (the kernel's cma/ib_cm for our containers):
// ports per container and port space, listeners, and the REQ/REP/RTU/REJ/DREQ exchange
// between ids of this host. A connection is a pair of linked CmIds; every change reaches the
// libraries as CmEventMsg datagrams on their event channels.
//
// Threading: router thread only (as everything the router holds).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "proto/cm_messages.h"
#include "router/cm_objects.h"

namespace wharf::router {

class Router;

class CmManager {
 public:
  explicit CmManager(Router* router) : router_(router) {}

  // Each returns 0 or a positive errno for the request's reply; events follow on channels.
  int bind_st(CmId* id, const CmAddress& addr);
  int resolve_addr_st(CmId* id, const CmAddress* src, const CmAddress& dst);
  int resolve_route_st(CmId* id);
  int listen_st(CmId* id, uint32_t backlog);
  int connect_st(CmId* id, const proto::CmConnParam& p);
  int accept_st(CmId* id, const proto::CmConnParam& p);
  int reject_st(CmId* id, const uint8_t* data, uint8_t len);
  int establish_st(CmId* id);
  int disconnect_st(CmId* id);
  int set_option_st(CmId* id, uint32_t option, uint32_t value);
  // Before the id is freed: tells its peer and its pending requesters, leaves the port table.
  void destroy_st(CmId* id);

  // Writes what a channel holds back once its socket has room; true when it is empty.
  bool flush_st(CmChannel* ch);

  // Calls f(id) for every id bound to a port (resources dump).
  template <class F>
  void for_each_bound(F&& f) const {
    for (const auto& [key, ids] : ports_)
      for (const CmId* id : ids) f(id);
  }

 private:
  using PortKey = std::tuple<const Container*, uint16_t, uint16_t>;  // container, ps, port

  const Container* container_of(const CmId* id) const;
  // The container of the caller's virtual network that owns `ip`, or nullptr.
  const Container* destination_st(const CmId* from, const CmAddress& ip) const;
  bool may_bind_ip(const CmId* id, const CmAddress& a) const;
  int check_port(const CmId* id, const CmAddress& a, bool reuse) const;
  int take_port(CmId* id, CmAddress a);
  void release_port(CmId* id);
  CmId* find_listener(const Container* c, uint16_t ps, const CmAddress& dst) const;

  // Event plumbing.
  proto::CmEventMsg event_for(const CmId* id, uint32_t type, int32_t status) const;
  void set_remote_port(proto::CmEventMsg* ev, const Container* c) const;
  void post_st(CmId* id, const proto::CmEventMsg& ev);
  void post_st(CmId* id, uint32_t type, int32_t status);
  void post_rejected_st(CmId* id, int32_t reason, const uint8_t* data, uint8_t len);
  void unlink_request(CmId* id);
  bool owns_qp(const CmId* id, uint32_t qpn) const;

  Router* router_;
  std::map<PortKey, std::vector<CmId*>> ports_;
  uint32_t next_ephemeral_ = 0;
};

}  // namespace wharf::router
