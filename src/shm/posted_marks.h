// Posted marks: how a library tells the router which of its QPs it gave new work, so that a
// router pass looks at those QPs and not at every QP of every session (docs/shm-rings.md,
// "Posted marks"). The marks live in the session's context page; the library only sets bits,
// the router only takes them.
#pragma once

#include <atomic>
#include <cstdint>

#include "shm/layout.h"

namespace wharf::shm {

// Library: marks QP `mark` (< kPostedMarks) after publishing its work (a ring index stored
// with release). The caller then reads `router_sleeping` (the doorbell): both ORs are
// sequentially consistent, so the read cannot pass them, and the router, which fences between
// announcing its sleep and taking marks, sees the mark or is seen asleep.
inline void mark_posted(ContextPage* page, uint32_t mark) {
  page->posted[mark / 64].fetch_or(uint64_t{1} << (mark % 64), std::memory_order_seq_cst);
  // After the word: a router that takes this summary bit finds the word's bit.
  page->posted_summary.fetch_or(uint64_t{1} << (mark / 64 / kPostedWordsPerSummaryBit),
                                std::memory_order_seq_cst);
}

// Library, after publishing work for the router: marks QP `mark` and says whether the router
// announced its sleep, in which case the caller writes the session's doorbell eventfd. The
// ORs of mark_posted are the fence of the sleep protocol (docs/shm-rings.md).
inline bool mark_posted_and_check_sleep(ContextPage* page, uint32_t mark) {
  mark_posted(page, mark);
  return page->router_sleeping.load(std::memory_order_seq_cst) != 0 &&
         page->router_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
}

// Router: calls each(mark) for every mark set since the last call and clears it. Marks set
// again before they are taken are reported once; none is lost (a mark set while a call runs
// is reported by it or by the next), and whatever was published before a mark was set is
// visible when each() runs. The page is hostile memory: any bit may be set, so each() must
// check what a mark names.
template <class F>
void take_posted(ContextPage* page, F&& each) {
  if (page->posted_summary.load(std::memory_order_relaxed) == 0) return;
  uint64_t summary = page->posted_summary.exchange(0, std::memory_order_acquire);
  while (summary != 0) {
    const auto group = static_cast<uint32_t>(__builtin_ctzll(summary));
    summary &= summary - 1;
    const uint32_t first = group * kPostedWordsPerSummaryBit;
    for (uint32_t w = first; w < first + kPostedWordsPerSummaryBit; ++w) {
      if (page->posted[w].load(std::memory_order_relaxed) == 0) continue;
      uint64_t bits = page->posted[w].exchange(0, std::memory_order_acquire);
      while (bits != 0) {
        each(w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits)));
        bits &= bits - 1;
      }
    }
  }
}

}  // namespace wharf::shm
