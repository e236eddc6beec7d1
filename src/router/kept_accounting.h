// What each container moved, kept for the next router process (issue #23 item 1: the
// per-container accounting outlives a crash or an upgrade). A container's counters are the sum
// of its live QPs' (shm::QpCounters, in the QPs' regions, which the libraries keep and a
// restored QP adopts) and what the router holds for it: the share of its destroyed QPs
// (Container::retired) and the time its work waited for rate limits
// (Container::throttled_ns). Those two live in a file beside the socket
// (RouterConfig::kept_accounting_path): a KeptSlots file (router/kept_slots.h) of magic
// "WHARFACC", version 1 and kSlots KeptTraffic records, a record of netns_ino 0 being a free
// slot.
//
// The router writes a container's record when one of its QPs is destroyed and, for the rate
// limits' time, once a second if it grew (a crash loses at most that second's share). A new
// process hands each record to the container of the same network namespace when it first
// sees it again (a resuming session or wharf-run registering it again), and keeps records
// nobody claims for kOrphanLifeNs; then it hands them back to be listed as departed
// containers. Containers beyond kSlots at once are not kept. The router's alone, the file is
// not hostile input, but it may be torn: a torn record is not read. Router thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "router/kept_slots.h"
#include "router/objects.h"

namespace wharf::router {

class KeptAccounting {
 public:
  static constexpr uint32_t kSlots = 8192;
  static constexpr uint32_t kNoSlot = KeptSlots::kNoSlot;
  // How long records of containers that have not come back are kept (wharf-run registers
  // its container again as soon as the router answers; a library resumes within
  // WHARF_RESUME_S, 30 s by default).
  static constexpr uint64_t kOrphanLifeNs = 120'000'000'000;

  // A container's names and what the router holds of its counters.
  struct Account {
    std::string tenant, network, name;
    Traffic traffic;  // its throttled_ns: Container::throttled_ns
  };

  // Maps `path`, taking the records a previous process left there ("": nothing is kept).
  // 0 or an errno (nothing is kept then).
  int open(const std::string& path);
  bool persistent() const { return slots_.mapped(); }
  // Unmaps the file as it is (what the process leaves, as if it died now).
  void close();

  // Writes what container `netns_ino` moved in `slot` (kNoSlot: a free one) and returns the
  // slot, or kNoSlot when every slot is taken (its accounting does not outlive the process).
  uint32_t keep(uint32_t slot, uint64_t netns_ino, const Account& a);
  void release(uint32_t slot);

  // What the previous process left for the container of namespace `netns_ino`, once: true
  // and *a, *slot (the record's slot, which the caller then keeps or releases), or false.
  bool claim(uint64_t netns_ino, Account* a, uint32_t* slot);
  // The records nobody claimed within kOrphanLifeNs of open (at `now`), released: what
  // containers that did not come back had moved.
  std::vector<Account> drop_stale(uint64_t now);
  size_t left() const { return left_.size(); }

 private:
  struct Left {
    uint32_t slot;
    uint64_t netns_ino;
    Account account;
  };
  KeptSlots slots_;
  uint64_t opened_ns_ = 0;
  std::vector<Left> left_;
};

}  // namespace wharf::router
