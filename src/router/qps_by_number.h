// The router's QPs by QP number (host-wide, router/router.h): an open-addressing set of the
// QPs themselves, looked up by the number each holds. A slot is one pointer, where a node-based
// map of numbers to QPs cost a node and a bucket per QP (issue #18: router memory per idle
// QP). Lookups (every work request to a QP on this host, every packet from another) take no
// lock and allocate nothing.
#pragma once

#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include <cstddef>
#include <cstdint>

#include "router/objects.h"

namespace wharf::router {

class QpsByNumber {
 public:
  // Adds qp under qp->qpn. False (nothing added) when another QP has that number.
  bool add(Qp* qp) { return set_.insert(qp).second; }
  // The QP numbered qpn, or nullptr.
  Qp* find(uint32_t qpn) const {
    auto it = set_.find(qpn);
    return it == set_.end() ? nullptr : *it;
  }
  bool contains(uint32_t qpn) const { return set_.contains(qpn); }
  void remove(uint32_t qpn) { set_.erase(qpn); }
  size_t size() const { return set_.size(); }
  // Calls f(Qp*) for each QP; f must not add or remove any.
  template <class F>
  void for_each(F&& f) const {
    for (Qp* qp : set_) f(qp);
  }

 private:
  // Hash and equality over a QP or a bare number, so that a number finds its QP.
  static uint32_t number(uint32_t qpn) { return qpn; }
  static uint32_t number(const Qp* qp) { return qp->qpn; }
  struct Hash {
    using is_transparent = void;
    template <class K>
    size_t operator()(const K& k) const {
      return absl::Hash<uint32_t>{}(number(k));
    }
  };
  struct Eq {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return number(a) == number(b);
    }
  };
  absl::flat_hash_set<Qp*, Hash, Eq> set_;
};

}  // namespace wharf::router
