// Fuzz target for router/tag_list.h: the matching list of a tag-matching SRQ driven by any
// sequence of ibv_post_srq_ops operations and arriving messages (both come from containers),
// and the TM headers read from the first bytes of a message.
//
// The input is a program: each step's first byte picks ADD, DEL (of a handle the program
// holds, or of any number), a message's tag, an unexpected message or SYNC. Checked: the
// list never holds more than its capacity; a buffer a tag takes agrees with it under its
// mask; a live handle is removed exactly once and a stale one never; headers are read from
// exactly their bytes (ASan).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "router/tag_list.h"

using namespace wharf;
using namespace wharf::router;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= kTmhSize + kRvhSize) {
    const std::vector<uint8_t> headers(data, data + kTmhSize + kRvhSize);
    const TmHeader h = parse_tmh(headers.data());
    const RndvHeader r = parse_rvh(headers.data() + kTmhSize);
    WHARF_FUZZ_CHECK(h.opcode == data[0] && (r.len >> 24) == data[kTmhSize + 12],
                     "headers read from the wrong bytes");
  }
  fuzz::Input in(data, size);
  TagList list(1 + in.u8() % 16);
  std::vector<uint32_t> live;  // handles the program holds, removed or not
  uint32_t sw_count = 0;
  while (!in.empty()) {
    switch (in.u8() % 5) {
      case 0: {  // ADD
        const uint64_t tag = in.u8(), mask = in.u8();
        const bool was_full = list.full();
        std::optional<uint32_t> h = list.add(TaggedBuffer{tag, mask, 0, {}}, sw_count);
        WHARF_FUZZ_CHECK(h.has_value() != was_full, "ADD refused with room or took without");
        if (h) live.push_back(*h);
        break;
      }
      case 1: {  // DEL
        const uint32_t pick = in.u32();
        if (live.empty() || (pick & 1) != 0) {
          list.remove(pick, sw_count);  // any number: must not disturb the list
          break;
        }
        const size_t i = (pick >> 1) % live.size();
        const uint32_t before = list.size();
        if (list.remove(live[i], sw_count)) {
          WHARF_FUZZ_CHECK(list.size() == before - 1, "DEL did not remove one buffer");
          WHARF_FUZZ_CHECK(!list.remove(live[i], sw_count), "a handle removed twice");
        }
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
      case 2: {  // a tagged message
        const uint64_t tag = in.u8();
        if (std::optional<uint32_t> slot = list.match(tag)) {
          WHARF_FUZZ_CHECK(((list.at(*slot).tag ^ tag) & list.at(*slot).mask) == 0,
                           "a buffer took a tag its mask refuses");
          list.take(*slot);
        }
        break;
      }
      case 3: list.note_unexpected(); break;
      default:  // software catches up, or not
        sw_count = in.u8() % 2 == 0 ? list.unexpected_count() : sw_count;
        list.sync(sw_count);
        break;
    }
    WHARF_FUZZ_CHECK(list.size() <= list.capacity(), "more buffers than the list holds");
  }
  return 0;
}
