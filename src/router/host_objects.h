// The objects of this router that packets, work requests and other objects name by number:
// QPs by QPN, registrations and memory windows by key (lkey/rkey), SRQs by SRQ number (how
// XRC initiators name an XRC SRQ). Sessions own the objects; this table only finds them.
// The data paths hold this table rather than the Router: a lookup is all they need of it.
// Router thread only.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "router/objects.h"
#include "router/qps_by_number.h"

namespace wharf::router {

class HostObjects {
 public:
  // ---- QPs (numbers as router/qps_by_number.h gives them) ----
  // Gives qp a number no other QP of this host has (qp->qpn); false when the host has
  // QpsByNumber::kMaxQps QPs.
  bool add_qp(Qp* qp) { return qps_.add(qp); }
  // Adds qp under the number it had before a router restart; false when that is taken.
  bool add_qp_numbered(Qp* qp, uint32_t qpn) { return qps_.add_numbered(qp, qpn); }
  void remove_qp(uint32_t qpn) { qps_.remove(qpn); }
  Qp* qp_by_qpn(uint32_t qpn) const { return qps_.find(qpn); }
  // Calls f(qp) for every QP of this host; f must not create or destroy QPs.
  template <class F>
  void for_each_qp(F&& f) const {
    qps_.for_each(f);
  }

  // ---- Keys of registrations and memory windows ----
  // A new key naming mr (nullptr: reserved for a memory window, naming nothing yet). Keys
  // are 32 random bits from the kernel (never 0 or 0xffffffff), so a guessed key names a
  // live MR with a chance of (registrations / 2^32) (issue #19; an RNIC's key has an index
  // and 8 random bits); ownership is still checked on every use.
  uint32_t add_key(Mr* mr);
  // Key `key`, which mr had before a router restart, names it again; false when it is taken
  // (or 0 or 0xffffffff, which add_key never gives).
  bool claim_key(uint32_t key, Mr* mr) {
    return key != 0 && key != UINT32_MAX && keys_.emplace(key, mr).second;
  }
  void remove_key(uint32_t key) { keys_.erase(key); }
  // Key `key` names `mr` from now on (a re-registration keeps its keys; a bound window).
  void rebind_key(uint32_t key, Mr* mr) { keys_[key] = mr; }
  // Whether `key` is taken: a registration's, a window's binding, or reserved for a window.
  bool key_in_use(uint32_t key) const { return keys_.count(key) != 0; }
  Mr* mr_by_key(uint32_t key) const {
    auto it = keys_.find(key);
    return it == keys_.end() ? nullptr : it->second;
  }

  // ---- SRQ numbers (ibv_get_srq_num), 1..0xffffff ----
  uint32_t add_srq(Srq* srq);
  void remove_srq(uint32_t srqn) { srqs_.erase(srqn); }
  Srq* srq_by_srqn(uint32_t srqn) const {
    auto it = srqs_.find(srqn);
    return it == srqs_.end() ? nullptr : it->second;
  }

 private:
  QpsByNumber qps_;
  std::unordered_map<uint32_t, Mr*> keys_;   // by lkey/rkey
  std::unordered_map<uint32_t, Srq*> srqs_;  // by SRQ number
  uint32_t next_srqn_ = 1;
};

}  // namespace wharf::router
