// Fuzz target for shm/cq_ring.h: the router's CQ producer against a container that rewrites
// the CQ's indices and stamps at will.
//
// Input: [log2 capacity] then a program of one-byte operations (some take operand bytes).
// Single-threaded, so every outcome is determined by the indices at the time of the call:
//   - push is kOk exactly when fewer than `capacity` entries are unconsumed, and then writes
//     only the claimed slot (stamp last) and advances the producer index by one;
//   - kFull exactly when `capacity` are unconsumed, kCorrupt when more; both write nothing;
//   - has_room agrees with the same arithmetic;
//   - waking a napping poller after a push leaves the notify line's `napping` at 0, whatever
//     the container wrote there;
//   - nothing is ever written outside the slots (an exactly-sized heap block, for ASan).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "shm/cq_ring.h"

namespace wharf::shm {
namespace {

using fuzz::Input;

void run(Input& in) {
  const uint32_t cap = 1u << (in.u8() % 7);
  auto hdr = std::make_unique<RingHeader>();
  std::unique_ptr<Cqe[]> slots(new Cqe[cap]());
  CqProducer prod(hdr.get(), slots.get(), cap);
  CqConsumer cons(hdr.get(), slots.get(), cap);
  CqNotify notify{};
  std::vector<Cqe> before(cap);
  uint64_t next_id = 1;
  for (int budget = 1024; !in.empty() && budget > 0; --budget) {
    const uint32_t p0 = hdr->producer.value.load();
    const uint32_t c0 = hdr->consumer.value.load();
    const uint32_t used = p0 - c0;
    switch (in.u8() % 7) {
      case 0: {
        std::memcpy(before.data(), slots.get(), sizeof(Cqe) * cap);
        Cqe e{};
        e.wr_id = next_id++;
        RingStatus st = prod.push(e);
        wake_napping_poller(&notify);
        WHARF_FUZZ_CHECK(notify.napping.load() == 0, "nap not ended by a push");
        if (used < cap) {
          WHARF_FUZZ_CHECK(st == RingStatus::kOk, "room but not accepted");
          WHARF_FUZZ_CHECK(hdr->producer.value.load() == p0 + 1, "producer index not advanced");
          const Cqe& s = slots[p0 & (cap - 1)];
          WHARF_FUZZ_CHECK(s.wr_id == e.wr_id && s.seq == p0 + 1, "claimed slot not published");
          for (uint32_t i = 0; i < cap; ++i)
            if (i != (p0 & (cap - 1)))
              WHARF_FUZZ_CHECK(std::memcmp(&slots[i], &before[i], sizeof(Cqe)) == 0,
                               "wrote another slot");
        } else {
          WHARF_FUZZ_CHECK(st == (used == cap ? RingStatus::kFull : RingStatus::kCorrupt),
                           "wrong refusal");
          WHARF_FUZZ_CHECK(hdr->producer.value.load() == p0, "refused push moved the index");
          WHARF_FUZZ_CHECK(std::memcmp(slots.get(), before.data(), sizeof(Cqe) * cap) == 0,
                           "refused push wrote a slot");
        }
        break;
      }
      case 1: {
        Cqe out;
        if (cons.pop(&out))
          WHARF_FUZZ_CHECK(hdr->consumer.value.load() == out.seq, "consumer index not the stamp");
        break;
      }
      case 2: hdr->producer.value.store(in.u32()); break;
      case 3: hdr->consumer.value.store(in.u32()); break;
      case 4: slots[in.u8() & (cap - 1)].seq = in.u32(); break;
      case 5: {
        const uint32_t n = in.u8() % (cap + 2);
        WHARF_FUZZ_CHECK(prod.has_room(n) == (used <= cap && cap - used >= n), "has_room");
        break;
      }
      case 6: notify.napping.store(in.u32()); break;
    }
  }
}

}  // namespace
}  // namespace wharf::shm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wharf::fuzz::Input in(data, size);
  wharf::shm::run(in);
  return 0;
}
