// Flow steering rules of RAW_PACKET QPs (ibv_create_flow): which frames of its virtual network
// each QP receives (router/flow_steering.cc delivers them). Router thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/messages.h"
#include "router/objects.h"

namespace wharf::router {

class Session;

class FlowRules {
 public:
  // A rule: frames sent by RAW_PACKET QPs of the owner's virtual network that match it (or
  // all of them, for a sniffer) go to qp.
  struct Rule {
    uint32_t handle = 0;  // router-wide
    Qp* qp = nullptr;
    bool sniffer = false;
    proto::FlowMatch match;
  };

  // ibv_create_flow: 0 and *handle, EINVAL (not a RAW_PACKET QP, an unknown type or an
  // inconsistent match), ENOMEM (the QP's or the router's limit).
  int create(Qp* qp, uint32_t type, const proto::FlowMatch& match, uint32_t* handle);
  // ibv_destroy_flow of a rule on a QP of `owner`: 0 or EINVAL.
  int destroy(const Session* owner, uint32_t handle);
  bool has_rules(const Qp* qp) const;
  void forget(Qp* qp);  // a QP's rules go with it
  const std::vector<Rule>& rules() const { return rules_; }

 private:
  std::vector<Rule> rules_;
  uint32_t next_handle_ = 1;
};

}  // namespace wharf::router
