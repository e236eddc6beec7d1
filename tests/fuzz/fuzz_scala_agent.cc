// Fuzz target for tools/wharf-scala/agent_wire.h: the messages `wharf-scala serve` and
// `sweep --remote HOST:PORT` read from each other over TCP (hostile: anyone who reaches the
// agent's port can send them).
//
// Checked for every input: a body that parses is decoded as a point, a half's info and a
// tally; whatever is accepted is within the bounds the decoders promise and survives its own
// encoding unchanged; whatever is refused says why.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../tools/wharf-scala/agent_wire.h"
#include "fuzz_check.h"

using namespace wharf::scala;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  std::string error;
  if (!agent::parse_body(std::string_view(reinterpret_cast<const char*>(data), size), &j, &error)) {
    WHARF_FUZZ_CHECK(!error.empty(), "refused without a reason");
    return 0;
  }
  const nlohmann::json& inner = j.contains("point") ? j["point"] : j;
  PointSpec p;
  RunOptions o;
  if (agent::point_from_json(inner, &p, &o, &error)) {
    WHARF_FUZZ_CHECK(p.ql >= 1 && p.qr >= 1 && p.mrs >= 1 && p.networks == 1, "bounds");
    WHARF_FUZZ_CHECK(double(p.mrs) * double(p.mr_size) <= 256.0 * 1024 * 1024, "memory bound");
    WHARF_FUZZ_CHECK(o.threads >= 1 && o.threads <= 64 && o.depth >= 1, "run bounds");
    PointSpec p2;
    RunOptions o2;
    WHARF_FUZZ_CHECK(agent::point_from_json(agent::point_to_json(p, o), &p2, &o2, &error),
                     "own point refused");
    WHARF_FUZZ_CHECK(agent::point_to_json(p2, o2) == agent::point_to_json(p, o), "point changed");
  } else {
    WHARF_FUZZ_CHECK(!error.empty(), "point refused without a reason");
  }
  HalfInfo h;
  if (agent::info_from_json(j.contains("info") ? j["info"] : j, &h, &error)) {
    HalfInfo h2;
    WHARF_FUZZ_CHECK(agent::info_from_json(agent::info_to_json(h), &h2, &error), "own info");
    WHARF_FUZZ_CHECK(agent::info_to_json(h2) == agent::info_to_json(h), "info changed");
  }
  Tally t;
  if (agent::tally_from_json(j.contains("tally") ? j["tally"] : j, &t, &error)) {
    WHARF_FUZZ_CHECK(t.weight >= 1 && t.latencies.size() <= agent::kMaxTallyLatencies, "tally");
    Tally t2;
    WHARF_FUZZ_CHECK(agent::tally_from_json(agent::tally_to_json(t), &t2, &error), "own tally");
    WHARF_FUZZ_CHECK(t2.bytes == t.bytes && t2.latencies == t.latencies, "tally changed");
  }
  agent::Greeting g;
  if (agent::greeting_from_json(j, &g, &error)) {
    WHARF_FUZZ_CHECK(g.max_qp_wr > 0 && g.device.size() <= 256, "greeting bounds");
    (void)agent::greeting_to_json(g).dump();  // never throws: the texts are whole characters
  }
  return 0;
}
