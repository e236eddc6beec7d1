// Where the host-to-host engine keeps its per-QP state (RemoteQpState) so that a router that
// dies at any instant is continued by the next process (issue #23): a file beside its socket
// (RouterConfig::kept_state_path), mapped shared, in which each active state lives in place (the
// engine works on it there: nothing is written for the restart on the data path) and each parked QP
// keeps its few bytes. The next process reads what the file holds, keeps the file's incarnation (so
// the other hosts see the same router reconnect, not a new one, and go back N as after a link cut)
// and offers each QP's continuation (RemoteQpState::continuation) to the QP restored under
// that number (claim_orphan).
//
// Layout (little-endian, this host's ABI; the file is the router's alone, mode 0600):
//   Header (one page): magic "WHARFKS1", version, the sizes below, the incarnation.
//   kActiveSlots tags, 16 bytes each: {sequence u64, qpn u32, used u32}.
//   kParkedSlots ParkedSlot, 64 bytes each: a tag, then a ParkedRemoteQp.
//   kActiveSlots states, each on pages of its own (RemoteQpState, whose tag is above).
// The file is sparse: only the pages of slots in use take memory (the tags' 256 KiB and the
// parked slots' 4 MiB are read at each start).
// A slot's tag is written after its content, so a process killed in between leaves a slot
// that is not used or that holds what it held before; a QP that is in two slots at once
// (moving between active and parked) continues from the one of higher sequence.
//
// A file of another layout or version, or none, starts afresh with a new incarnation. The
// router's alone, it is not hostile input, but it may be torn: every continuation read from it
// is bounded (PSNs masked, the requester's host checked against the cluster) before use.
//
// Without a path (RouterConfig::kept_state_path empty: no resume key) the same slots live in
// anonymous memory and nothing outlives the process. Router thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "router/remote_qp_state.h"

namespace wharf::router {

class KeptRemoteStates {
 public:
  static constexpr uint32_t kActiveSlots = 16384;  // QPs with work in flight at once
  static constexpr uint32_t kParkedSlots = 65536;  // quiet connected QPs
  // How long a continuation waits for its QP to be restored (its library resumes within
  // WHARF_RESUME_S, 30 s by default) before drop_stale_orphans forgets it.
  static constexpr uint64_t kOrphanLifeNs = 120'000'000'000;

  KeptRemoteStates() = default;
  ~KeptRemoteStates();
  KeptRemoteStates(const KeptRemoteStates&) = delete;
  KeptRemoteStates& operator=(const KeptRemoteStates&) = delete;

  // Maps `path` ("" for anonymous memory), taking the incarnation and the continuations a
  // previous process left in it if its layout is this one's, else starting afresh with
  // `fresh_incarnation`. `hosts`: the cluster's size (a continuation naming a host beyond it
  // is dropped). 0 or an errno (the caller may go on with open("") instead).
  int open(const std::string& path, uint32_t fresh_incarnation, size_t hosts);
  uint32_t incarnation() const { return incarnation_; }
  // Whether the states outlive the process (a file is mapped).
  bool persistent() const { return persistent_; }

  // A slot for QP qpn's active state, constructed from `initial`, or null when every slot is
  // taken (the caller keeps that state elsewhere: it does not survive a restart).
  RemoteQpState* take_active(uint32_t qpn, const RemoteQpState& initial);
  // Whether st is one of take_active's.
  bool holds(const RemoteQpState* st) const;
  void release_active(RemoteQpState* st);
  // Keeps qpn's parked form (not when every slot is taken: it does not survive a restart).
  void keep_parked(uint32_t qpn, const ParkedRemoteQp& p);
  // Forgets qpn's parked form, if kept.
  void release_parked(uint32_t qpn);

  // What the previous process left for QP qpn, once, given its rings as the restored QP
  // found them. A QP that was active goes on with a state in one of this object's slots
  // (*active, released as take_active's: its continuation, with the responder's cache of
  // atomic results, so that a duplicate of an atomic the old process executed is answered and
  // not executed again), after `finish` was given the completions the old process left half
  // made; a parked one with its parked form (*parked, kept as qpn's). False if it left
  // nothing usable.
  using FinishCompletions = std::function<void(const RemoteQpState::Unfinished&)>;
  bool claim_orphan(uint32_t qpn, RemoteQpState::RingTails tails, const FinishCompletions& finish,
                    RemoteQpState** active, ParkedRemoteQp* parked);
  size_t orphans() const { return orphans_.size(); }
  // Forgets the continuations no QP claimed within kOrphanLifeNs of open (at `now`).
  void drop_stale_orphans(uint64_t now);
  // Gives back the memory of the active slots no state uses (after many QPs went quiet).
  void trim();

 private:
  struct Tag {
    uint64_t sequence;  // when it was written, in this file's order
    uint32_t qpn;
    uint32_t used;
  };
  struct ParkedSlot;
  struct Header;
  static Header this_layout(uint32_t incarnation);

  struct Orphan {
    RemoteQpState* active;  // null: parked
    ParkedRemoteQp parked;
  };
  // Places what the previous process's file (`old`, mapped) left in this one, as orphans.
  void adopt_previous(const uint8_t* old);
  static Tag* active_tag(const uint8_t* map, uint32_t i);
  static RemoteQpState* active(const uint8_t* map, uint32_t i);
  static ParkedSlot* parked(const uint8_t* map, uint32_t i);
  void tag(Tag* t, uint32_t qpn, uint32_t used);

  uint8_t* map_ = nullptr;
  size_t map_len_ = 0;
  bool persistent_ = false;
  uint32_t incarnation_ = 0;
  size_t hosts_ = 0;  // the cluster's size: a continuation naming a host beyond it is dropped
  uint64_t sequence_ = 0;
  uint64_t opened_ns_ = 0;
  std::vector<uint32_t> free_active_, free_parked_;
  // The parked slot of each QPN kept parked (Qp's record has no room for it).
  std::unordered_map<uint32_t, uint32_t> parked_slots_;
  std::unordered_map<uint32_t, Orphan> orphans_;  // by QPN
};

}  // namespace wharf::router
