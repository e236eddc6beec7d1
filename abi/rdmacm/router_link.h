// The process's connection manager link: one router connection for all rdma_cm calls of the
// process (opened on first use, never at load time, then kCmOpen), and the verbs device
// `wharf0` opened once through our libibverbs, whose context every id shares. When the router
// dies or is replaced, the link resumes with the next router process on the same socket.
//
// Thread-safe: calls are serialized by RouterClient; get() and device() by an internal mutex.
#pragma once

#include <infiniband/verbs.h>

#include <mutex>
#include <string>

#include "proto/cm_messages.h"
#include "proto/router_client.h"
#include "proto/session_watch.h"

namespace wharf::rdmacm {

class RouterLink {
 public:
  // The connected link, or nullptr with errno set (the router is unreachable: ENODEV, or what
  // kCmOpen answered). A failed attempt is retried by the next call.
  static RouterLink* get();

  // One request; returns 0 or a positive errno.
  template <class Req, class Rep>
  int call(proto::Op op, const Req& req, Rep* rep, const int* fds = nullptr, int nfds = 0) {
    return client_.call(op, req, fds, nfds, rep);
  }

  // One one-way request (no reply; proto::RouterClient::post); returns 0 or a positive errno.
  template <class Req>
  int post(proto::Op op, const Req& req) {
    return client_.post(op, req);
  }

  // The container's address and port, as kCmOpen reported them.
  const proto::CmOpenRep& info() const { return info_; }
  bool ethernet() const { return info_.link_layer == IBV_LINK_LAYER_ETHERNET; }

  // The verbs context of `wharf0` and the PD ids use when the application gives none (rdma-core
  // allocates one per device). nullptr with errno set if the device cannot be opened.
  ibv_context* device();
  ibv_pd* pd();
  // The XRC domain of XRC ids' SRQs and target QPs, one for the device (rdma-core's
  // ucma_get_xrcd), opened on first use and kept, as the device is.
  ibv_xrcd* xrcd();

  // Device limits read when the device was opened (valid once device() succeeded).
  uint8_t max_initiator_depth() const { return max_initiator_depth_; }
  uint8_t max_responder_resources() const { return max_responder_resources_; }
  // The path MTU rdma_cm gives connections, as the kernel's cma does: the port's active MTU
  // on InfiniBand; on Ethernet no more than what fits the container interface's MTU with
  // RoCE's headers (1024 for a 1500-byte Ethernet MTU).
  ibv_mtu path_mtu() const { return path_mtu_; }

 private:
  RouterLink() = default;
  int open_device_locked();
  // Connects `fresh` to a new router process on the same socket after this one's died or
  // was replaced (issue #23): CmOpen, the channels under their handles, then CmResume (the
  // router continues the ids it kept). The ids' QPs need nothing: libibverbs restores them
  // with the transitions connection steps applied (proto/qp_cm_step_log.h).
  int resume(proto::RouterClient* fresh);

  proto::RouterClient client_;
  std::string socket_;         // the router's, as it was at the first connect
  proto::SessionWatch watch_;  // resumes as soon as the router hangs up
  proto::CmOpenRep info_;
  std::mutex device_mu_;
  ibv_device** devices_ = nullptr;  // kept for the life of the process, as the contexts are
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_xrcd* xrcd_ = nullptr;
  uint8_t max_initiator_depth_ = 0;
  uint8_t max_responder_resources_ = 0;
  ibv_mtu path_mtu_ = IBV_MTU_1024;
};

}  // namespace wharf::rdmacm
