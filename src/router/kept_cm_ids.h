// Where the connection manager keeps its rdma_cm ids so that a router that dies at any instant
// is continued by the next process (issue #23): a file beside its socket
// (RouterConfig::kept_cm_path), mapped shared, with one slot per id. Ids change on the control
// path only (a request, a MAD, a timer), and CmManager writes each one changed after the loop
// turn that changed it.
//
// The file is a KeptSlots file (router/kept_slots.h: two checksummed copies per slot) of
// magic "WHARFCM1", version 1 and kSlots KeptCmId records; a record of comm 0 is a free slot.
//
// The next process hands the records of each process to it when its librdmacm resumes
// (claim: by the container's network namespace and the process's PID, which a resuming
// library keeps); records nobody claims within kOrphanLifeNs are forgotten. A file of another
// layout, or one this user does not own alone, is started afresh. The router's alone, it is
// not hostile input, but it may be torn: CmManager checks each record as it restores it.
// Without a path nothing is kept. Router thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/cm_messages.h"
#include "router/kept_slots.h"

namespace wharf::router {

// One rdma_cm id as CmManager keeps it (router/cm_objects.h, CmId). Plain bytes.
struct KeptCmId {
  uint64_t netns_ino = 0;  // the owner's container
  int32_t pid = 0;         // the owner's process
  uint32_t handle = 0;     // in the owner's session
  uint32_t comm = 0;       // 0: a free slot
  uint32_t channel = 0;    // the handle of the channel it reports to
  uint32_t backlog = 0;
  uint32_t peer_comm = 0;
  uint32_t requester_comm = 0;
  int32_t peer_host = 0;
  uint16_t ps = 0;
  uint16_t remote_lid = 0;
  uint8_t qp_type = 0;
  uint8_t state = 0;  // enum CmState
  uint8_t active = 0;
  uint8_t bound = 0;
  uint8_t reuseaddr = 0;
  uint8_t afonly = 0;
  // 1: its peer disconnected while no process had claimed it (KeptCmIds::disconnect_left);
  // the process that claims it hears RDMA_CM_EVENT_DISCONNECTED.
  uint8_t peer_left = 0;
  uint8_t reserved = 0;
  proto::CmAddr local;
  proto::CmAddr remote;
  proto::Gid remote_gid{};
};

class KeptCmIds {
 public:
  static constexpr uint32_t kSlots = 8192;
  static constexpr uint32_t kNoSlot = KeptSlots::kNoSlot;
  // How long the ids of a process that has not resumed are kept (its library resumes within
  // WHARF_RESUME_S, 30 s by default).
  static constexpr uint64_t kOrphanLifeNs = 120'000'000'000;

  KeptCmIds() = default;
  KeptCmIds(const KeptCmIds&) = delete;
  KeptCmIds& operator=(const KeptCmIds&) = delete;

  // Maps `path`, taking the records a previous process left there ("": nothing is kept).
  // 0 or an errno (nothing is kept then).
  int open(const std::string& path);
  bool persistent() const { return slots_.mapped(); }
  // Unmaps the file as it is (what the process leaves, as if it died now): nothing is kept or
  // released from then on.
  void close();

  // Writes r in `slot` (kNoSlot: a free one) and returns the slot, or kNoSlot when every slot
  // is taken (the id then does not outlive the process).
  uint32_t keep(uint32_t slot, const KeptCmId& r);
  void release(uint32_t slot);

  // What the previous process left of process `pid` in the container of namespace
  // `netns_ino`, once; each record keeps its slot, which the caller then keeps or releases.
  struct Left {
    uint32_t slot;
    KeptCmId id;
  };
  std::vector<Left> claim(uint64_t netns_ino, int32_t pid);
  // A DREQ from host `from`'s id `sender_comm` for an id no process claimed yet: if it is a
  // connected id of that peer, it is kept closed with peer_left set. False if there is none.
  bool disconnect_left(uint32_t comm, int32_t from, uint32_t sender_comm);
  // Forgets the records nobody claimed within kOrphanLifeNs of open (at `now`).
  void drop_stale(uint64_t now);
  size_t left() const { return left_.size(); }

 private:
  KeptSlots slots_;
  uint64_t opened_ns_ = 0;
  std::vector<Left> left_;
};

}  // namespace wharf::router
