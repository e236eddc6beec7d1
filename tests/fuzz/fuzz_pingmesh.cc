// Fuzz target for Pingmesh (proto/pingmesh_wire.h, pingmesh/mesh.h): a router takes probes and
// answers from every other router, and any of them may send anything.
//
// The input is a program over one Mesh of five hosts (this one is host 2): rounds at times it
// chooses, answers it writes byte by byte or makes from a probe really sent (then changed),
// from any host. Checked throughout: decode_probe accepts exactly kProbeSize bytes of a known
// kind with the reserved field 0, and they encode back to the same bytes; an answer is taken
// only for a probe outstanding to that peer, at most once; every summary is consistent (the
// window holds at most kWindow finished probes, loss in [0, 1], min <= p50 <= p99 <= max, a
// peer down only after kDownAfter losses); the totals add up (answered + lost <= probes, the
// histogram counts every answer once).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "pingmesh/mesh.h"

using namespace wharf;
namespace pm = wharf::proto::pingmesh;

namespace {

void check_peer(const pingmesh::Mesh& mesh, int peer) {
  const pingmesh::PeerSummary s = mesh.summary(peer);
  const pingmesh::PeerTotals& t = mesh.totals(peer);
  WHARF_FUZZ_CHECK(s.answered + s.lost <= pingmesh::kWindow, "window overflows");
  WHARF_FUZZ_CHECK(s.loss >= 0 && s.loss <= 1, "loss out of range");
  WHARF_FUZZ_CHECK(
      s.rtt_min_ns <= s.rtt_p50_ns && s.rtt_p50_ns <= s.rtt_p99_ns && s.rtt_p99_ns <= s.rtt_max_ns,
      "percentiles out of order");
  WHARF_FUZZ_CHECK(s.peer_delay_p50_ns <= s.peer_delay_p99_ns, "delay percentiles out of order");
  WHARF_FUZZ_CHECK(s.state != pingmesh::PeerState::kDown || s.lost >= pingmesh::kDownAfter ||
                       t.lost >= pingmesh::kDownAfter,
                   "down without losses");
  WHARF_FUZZ_CHECK(s.answered <= t.answered && s.lost <= t.lost, "window beyond totals");
  WHARF_FUZZ_CHECK(t.answered + t.lost <= t.probes, "more outcomes than probes");
  uint64_t bucketed = 0;
  for (uint64_t n : t.rtt_buckets) bucketed += n;
  WHARF_FUZZ_CHECK(bucketed == t.answered, "histogram miscounts");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  constexpr int kHosts = 5;
  pingmesh::Mesh mesh(kHosts, 2, 1000, 1000);
  uint64_t now = 1000;
  std::vector<std::pair<int, pm::Probe>> sent;  // the last round's
  while (!in.empty()) {
    const uint8_t op = in.u8();
    now += in.u32() % 3000;
    if (op % 3 == 0) {
      const uint8_t refuse = in.u8();
      sent.clear();
      mesh.tick(now, [&](int peer, const pm::Probe& p) {
        WHARF_FUZZ_CHECK(peer != 2 && peer >= 0 && peer < kHosts, "probed a non-peer");
        sent.emplace_back(peer, p);
        // Two bits of `refuse` per round: host 0 and 1 may be skipped, any host lost.
        if (peer < 2 && ((refuse >> (4 + peer)) & 1) != 0) return pingmesh::Mesh::Sent::kSkipped;
        return ((refuse >> peer) & 1) == 0 ? pingmesh::Mesh::Sent::kSent
                                           : pingmesh::Mesh::Sent::kLost;
      });
      continue;
    }
    pm::Probe reply;
    const int from = static_cast<int>(in.u8() % (kHosts + 2)) - 1;  // -1 .. kHosts
    if (op % 3 == 1) {
      // Raw bytes off the wire.
      uint8_t bytes[pm::kProbeSize + 1];  // one more than a probe, to try that length too
      const size_t len = in.u8() % (sizeof(bytes) + 1);
      for (size_t i = 0; i < len; ++i) bytes[i] = in.u8();
      const bool ok = pm::decode_probe(bytes, len, &reply);
      if (ok) {
        WHARF_FUZZ_CHECK(len == pm::kProbeSize, "decoded the wrong length");
        uint8_t again[pm::kProbeSize];
        WHARF_FUZZ_CHECK(proto::encode(reply, again, sizeof(again)) == pm::kProbeSize &&
                             std::memcmp(again, bytes, pm::kProbeSize) == 0,
                         "does not round-trip");
      }
      if (!ok) continue;
    } else {
      // An answer to a probe really sent, perhaps changed.
      if (sent.empty()) continue;
      const auto& [peer, probe] = sent[in.u8() % sent.size()];
      reply = pm::answer(probe, in.u32(), in.u32());
      if (in.u8() & 1) reply.seq ^= in.u32();
      if (in.u8() & 1) reply.sent_ns ^= in.u32();
      (void)peer;
    }
    const uint64_t answered_before = from >= 0 && from < kHosts ? mesh.totals(from).answered : 0;
    const bool taken = mesh.on_reply(from, reply, now);
    if (taken) {
      WHARF_FUZZ_CHECK(from >= 0 && from < kHosts && from != 2, "taken from a non-peer");
      WHARF_FUZZ_CHECK(reply.kind == pm::kReply, "took a probe as an answer");
      WHARF_FUZZ_CHECK(mesh.totals(from).answered == answered_before + 1, "answer not counted");
      WHARF_FUZZ_CHECK(!mesh.on_reply(from, reply, now), "the same answer taken twice");
    }
    for (int h = 0; h < kHosts; ++h)
      if (h != 2) check_peer(mesh, h);
  }
  return 0;
}
