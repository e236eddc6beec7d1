#include "pingmesh/mesh.h"

#include <algorithm>

namespace wharf::pingmesh {
namespace {

// The nearest-rank percentile `pct` of the values (sorted in place); 0 for none.
uint64_t percentile(std::vector<uint64_t>& values, unsigned pct) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = (values.size() * pct + 99) / 100;  // ceil(n * pct / 100), >= 1
  return values[std::max<size_t>(rank, 1) - 1];
}

size_t bucket_of(uint64_t rtt_ns) {
  const double seconds = static_cast<double>(rtt_ns) * 1e-9;
  return static_cast<size_t>(std::lower_bound(kRttBuckets.begin(), kRttBuckets.end(), seconds) -
                             kRttBuckets.begin());
}

}  // namespace

const char* state_name(PeerState s) {
  switch (s) {
    case PeerState::kUp: return "up";
    case PeerState::kDown: return "down";
    case PeerState::kUnknown: break;
  }
  return "unknown";
}

Mesh::Mesh(int hosts, int self, uint64_t interval_ns, uint64_t start_ns)
    : peers_(static_cast<size_t>(std::max(hosts, 0))),
      self_(self),
      interval_ns_(std::max<uint64_t>(interval_ns, 1)),
      next_round_ns_(start_ns) {}

void Mesh::lose(Peer& p, Slot& s) {
  s.outcome = Outcome::kLost;
  ++p.totals.lost;
  ++p.lost_in_a_row;
}

bool Mesh::tick(uint64_t now, const Send& send) {
  if (now < next_round_ns_) return false;
  for (Peer& p : peers_)
    for (Slot& s : p.window)
      if (s.outcome == Outcome::kPending) lose(p, s);
  const uint32_t seq = next_seq_++;
  for (int h = 0; h < hosts(); ++h) {
    if (h == self_) continue;
    Peer& p = peers_[static_cast<size_t>(h)];
    Slot& s = p.window[seq % kWindow];
    proto::pingmesh::Probe probe;
    probe.seq = seq;
    probe.sent_ns = now;
    const Sent sent = send(h, probe);
    if (sent == Sent::kSkipped) {
      s = Slot{};
      continue;
    }
    s = Slot{Outcome::kPending, seq, now, 0, 0};
    ++p.totals.probes;
    if (sent == Sent::kLost) lose(p, s);
  }
  // The next round one interval after this one, or after now if the router fell behind.
  next_round_ns_ += interval_ns_;
  if (next_round_ns_ <= now) next_round_ns_ = now + interval_ns_;
  return true;
}

bool Mesh::on_reply(int peer, const proto::pingmesh::Probe& reply, uint64_t now) {
  if (peer < 0 || peer >= hosts() || peer == self_ || reply.kind != proto::pingmesh::kReply)
    return false;
  Peer& p = peers_[static_cast<size_t>(peer)];
  Slot& s = p.window[reply.seq % kWindow];
  if (s.outcome != Outcome::kPending || s.seq != reply.seq || s.sent_ns != reply.sent_ns ||
      now < s.sent_ns)
    return false;
  const uint64_t round_trip = now - s.sent_ns;
  // The answerer's figure is its word only: never more than the whole round trip.
  const uint64_t held =
      reply.replied_ns >= reply.received_ns ? reply.replied_ns - reply.received_ns : 0;
  s.peer_delay_ns = std::min(held, round_trip);
  s.rtt_ns = round_trip - s.peer_delay_ns;
  s.outcome = Outcome::kAnswered;
  p.lost_in_a_row = 0;
  p.ever_answered = true;
  ++p.totals.answered;
  p.totals.rtt_sum_ns += s.rtt_ns;
  ++p.totals.rtt_buckets[bucket_of(s.rtt_ns)];
  return true;
}

PeerSummary Mesh::summary(int peer) const {
  PeerSummary out;
  if (peer < 0 || peer >= hosts() || peer == self_) return out;
  const Peer& p = peers_[static_cast<size_t>(peer)];
  std::vector<uint64_t> rtts;
  std::vector<uint64_t> delays;
  for (const Slot& s : p.window) {
    if (s.outcome == Outcome::kLost) ++out.lost;
    if (s.outcome != Outcome::kAnswered) continue;
    ++out.answered;
    rtts.push_back(s.rtt_ns);
    delays.push_back(s.peer_delay_ns);
  }
  const uint32_t finished = out.answered + out.lost;
  out.loss = finished == 0 ? 0 : static_cast<double>(out.lost) / finished;
  out.rtt_p50_ns = percentile(rtts, 50);
  out.rtt_p99_ns = percentile(rtts, 99);
  out.rtt_min_ns = rtts.empty() ? 0 : rtts.front();  // sorted by percentile()
  out.rtt_max_ns = rtts.empty() ? 0 : rtts.back();
  out.peer_delay_p50_ns = percentile(delays, 50);
  out.peer_delay_p99_ns = percentile(delays, 99);
  out.state = p.lost_in_a_row >= kDownAfter ? PeerState::kDown
              : p.ever_answered             ? PeerState::kUp
                                            : PeerState::kUnknown;
  return out;
}

}  // namespace wharf::pingmesh
