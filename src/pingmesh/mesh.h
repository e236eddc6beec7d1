// Pingmesh (issue #20): what one router knows of its paths to every other router, from probes
// it sends every interval (proto/pingmesh_wire.h). Pure and deterministic: time is passed in,
// sending is the caller's (router/remote.cc binds it to the host links).
//
// Per peer it keeps the last kWindow probes (the sliding window the percentiles and the loss
// ratio are taken over: kWindow intervals, about a minute at the default 1 s) and totals since
// start (the Prometheus histogram and counters). A probe counts as lost when no answer came
// before the next round (one interval) or the link could not take it; an answer after that is
// ignored. The round trip it keeps is the network's: the time from sending to the answer less
// the time the answerer says it held the probe, which is kept apart as the peer's delay.
//
// A peer is "unknown" until a probe to it is answered or kDownAfter are lost, "down" while its
// last kDownAfter probes were all lost, "up" otherwise (its last probe was answered, or fewer
// than kDownAfter in a row were lost since one was).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "proto/pingmesh_wire.h"

namespace wharf::pingmesh {

constexpr size_t kWindow = 64;
constexpr uint32_t kDownAfter = 3;
// The RTT histogram's upper bounds in seconds (Prometheus `le`; +Inf follows).
inline constexpr std::array<double, 15> kRttBuckets = {
    5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1.0};

enum class PeerState { kUnknown, kUp, kDown };
const char* state_name(PeerState s);  // "unknown", "up", "down"

// One peer's window (nanoseconds; the RTT and delay figures are 0 when no probe in the window
// was answered).
struct PeerSummary {
  PeerState state = PeerState::kUnknown;
  uint32_t answered = 0;  // finished probes in the window that were answered
  uint32_t lost = 0;      // ... and that were lost
  double loss = 0;        // lost / (answered + lost), 0 when none finished
  uint64_t rtt_min_ns = 0, rtt_p50_ns = 0, rtt_p99_ns = 0, rtt_max_ns = 0;
  uint64_t peer_delay_p50_ns = 0, peer_delay_p99_ns = 0;
};

// One peer's totals since start.
struct PeerTotals {
  uint64_t probes = 0;  // sent or attempted
  uint64_t lost = 0;
  uint64_t answered = 0;
  uint64_t rtt_sum_ns = 0;
  std::array<uint64_t, kRttBuckets.size() + 1> rtt_buckets{};  // per bucket, not cumulative
};

class Mesh {
 public:
  // What became of one probe a round asked for.
  enum class Sent {
    kSent,     // on its way
    kLost,     // the links could not take it: lost at once
    kSkipped,  // not this peer, this round (not a member of the probed network): no probe
  };
  using Send = std::function<Sent(int peer, const proto::pingmesh::Probe& probe)>;

  // hosts: how many routers the cluster has; self: this one's index (never probed);
  // interval_ns > 0: the time between rounds; the first round is due at start_ns.
  Mesh(int hosts, int self, uint64_t interval_ns, uint64_t start_ns);

  uint64_t next_round_ns() const { return next_round_ns_; }
  // If a round is due at `now`: ends the previous round's unanswered probes as lost, then
  // sends a probe to every peer (that send() does not skip). True if a round was made.
  bool tick(uint64_t now, const Send& send);
  // An answer from `peer` that arrived at `now`. False when it answers no outstanding probe
  // to that peer (late, repeated, or not ours), which changes nothing.
  bool on_reply(int peer, const proto::pingmesh::Probe& reply, uint64_t now);

  int hosts() const { return static_cast<int>(peers_.size()); }
  int self() const { return self_; }
  uint64_t interval_ns() const { return interval_ns_; }
  PeerSummary summary(int peer) const;
  const PeerTotals& totals(int peer) const { return peers_[static_cast<size_t>(peer)].totals; }
  // Whether a probe was ever sent (or tried) to peer.
  bool probed(int peer) const { return totals(peer).probes != 0; }

 private:
  enum class Outcome : uint8_t { kNone, kPending, kAnswered, kLost };
  struct Slot {
    Outcome outcome = Outcome::kNone;
    uint32_t seq = 0;
    uint64_t sent_ns = 0;
    uint64_t rtt_ns = 0;         // kAnswered: the network's round trip
    uint64_t peer_delay_ns = 0;  // kAnswered: what the answerer held it
  };
  struct Peer {
    std::array<Slot, kWindow> window;  // probe seq at window[seq % kWindow]
    uint32_t lost_in_a_row = 0;
    bool ever_answered = false;
    PeerTotals totals;
  };
  void lose(Peer& p, Slot& s);

  std::vector<Peer> peers_;
  const int self_;
  const uint64_t interval_ns_;
  uint64_t next_round_ns_;
  uint32_t next_seq_ = 1;  // one numbering for all peers
};

}  // namespace wharf::pingmesh
