// The router's half of the direct intra-host path (docs/ARCHITECTURE.md, "The direct path"):
// which QPs may execute their sends in their own library, and the handshake that keeps every
// change the library relies on safe.
//
// An RC QP in RTS whose connected peer QP lives on this host may execute its sends in its own
// library: the library copies into the peer's registered memory, takes the peer's receive
// WQEs and writes both sides' completions. Here the router decides when that is allowed (the
// QP's direct line, shm::QpDirect) and, before any change that could invalidate the library's
// view, turns the line Off or bumps the MR epoch and then waits until no work request is
// executing. Whatever the library cannot do on the fast path (errors, RNR, unmapped memory)
// it posts to the send ring as usual, and the router executes it with full semantics.
// Router thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "router/host_objects.h"
#include "router/objects.h"

namespace wharf::router {

class DirectLines {
 public:
  // enabled: wharfd --direct-path; link_layer: whether QPs answer each other (peer_rules.h).
  DirectLines(const HostObjects& objects, bool enabled, uint8_t link_layer)
      : objects_(objects), enabled_(enabled), link_layer_(link_layer) {}

  // Re-decides, after any change to qp, whether qp and the QP it is connected to may execute
  // their sends themselves; a QP whose line stays On gets a new generation (its library
  // re-reads the peer's description).
  void refresh(Qp* qp);
  // Turns qp's line Off, first waiting (bounded) for a work request its library executes.
  void disable(Qp* qp, bool wait_for_library = true);
  // The QP qp executes into while its line is On, else nullptr.
  Qp* peer_of(const Qp* qp) const;

  // A registration went away: the caller publishes the returned epoch to every library (its
  // context page), then calls wait_out_retired_keys, which waits (bounded) until no work
  // request that might still use a key of an older epoch is executing.
  uint32_t next_mr_epoch() { return ++mr_epoch_; }
  void wait_out_retired_keys();

 private:
  bool eligible(const Qp* qp) const;
  void set(Qp* qp, bool on);
  // Waits while qp's library is Busy; false if it stayed Busy past the bound.
  bool wait_idle(Qp* qp);

  const HostObjects& objects_;
  const bool enabled_;
  const uint8_t link_layer_;
  std::vector<Qp*> on_;  // QPs whose line is On
  uint32_t mr_epoch_ = 0;
};

}  // namespace wharf::router
