// Fuzz target for router/flow_match.h: the headers of a frame a RAW_PACKET QP sent, which the
// router parses to steer it (any bytes another container chooses).
//
// Checked for every input: parsing reads nothing past the frame (ASan), finds a layer only when
// the frame is long enough to hold it, and a sniffer-like rule (all masks zero) matches every
// frame; the RSS hash is a function of the frame (the same twice).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_check.h"
#include "router/flow_match.h"

using namespace wharf;
using namespace wharf::router;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so that ASan sees a read past the frame.
  const std::vector<uint8_t> frame(data, data + size);
  const FrameFields f = parse_frame(frame.data(), frame.size());
  WHARF_FUZZ_CHECK(f.ip_version == 0 || size >= 14 + (f.ip_version == 4 ? 20 : 40),
                   "an IP layer in a frame too short for it");
  WHARF_FUZZ_CHECK(f.l4_proto == 0 || f.ip_version != 0, "ports without an IP layer");
  WHARF_FUZZ_CHECK(flow_matches(proto::FlowMatch{}, f), "an empty rule refused a frame");
  std::array<uint8_t, proto::kRssKeyLen> key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 37 + 11);
  WHARF_FUZZ_CHECK(rss_hash(key, ~0ull, f) == rss_hash(key, ~0ull, f), "hash not a function");
  return 0;
}
