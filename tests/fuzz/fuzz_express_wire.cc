// Fuzz target for proto/express_wire.h: a library reads express frames from a connection
// whose other end is another container's library, and a router reads the Hello of a
// connection from another host.
//
// Checked for every input: splitting the input at frame headers never reads outside it (an
// exactly-sized buffer under ASan); a header it accepts has a known kind and a payload only
// if a Message, no longer than kMaxMessage, and encodes back to the same bytes; every proper
// prefix of a header asks for more; the Hello decoder accepts only kHelloSize bytes with our
// magic and version.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "proto/express_wire.h"

using namespace wharf::proto;
using namespace wharf::proto::express;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> in(data, data + size);  // exactly sized: strays are heap overflows
  size_t at = 0;
  for (;;) {
    Frame f;
    const Next next = next_header(in.data() + at, in.size() - at, &f);
    if (next != Next::kFrame) break;
    WHARF_FUZZ_CHECK(in.size() - at >= kFrameSize, "header outside the input");
    WHARF_FUZZ_CHECK(f.kind == kMessage ? f.length <= kMaxMessage
                                        : f.length == 0 && (f.kind == kReady || f.kind == kAck ||
                                                            f.kind == kRefuse),
                     "a frame no peer may send");
    uint8_t again[kFrameSize];
    encode_frame(f, again);
    WHARF_FUZZ_CHECK(std::memcmp(again, in.data() + at, kFrameSize) == 0,
                     "header does not round-trip");
    for (size_t cut = 0; cut < kFrameSize; ++cut) {
      Frame g;
      WHARF_FUZZ_CHECK(next_header(in.data() + at, cut, &g) == Next::kNeedMore,
                       "prefix not incomplete");
    }
    // The payload as the library skips it: what is left of the input, at most.
    at += kFrameSize + std::min<size_t>(f.length, in.size() - at - kFrameSize);
  }
  if (in.size() >= kHelloSize) {
    Hello h;
    if (decode_hello(in.data(), &h))
      WHARF_FUZZ_CHECK(h.magic == kHelloMagic && h.version == kVersion, "Hello accepted");
  }
  return 0;
}
