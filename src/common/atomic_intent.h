// What the router notes before a remote atomic changes its target, so that a process that
// continues the request after a crash (issue #23) does not change it twice: the value the
// atomic read there. Kept where the request's other state outlives the process: a QP's
// shared region for one host's atomics (shm::QpLocalCompletions), the kept responder state
// for those from another host (rc::Responder).
//
// The continuing process finds the intent naming the request it is about to execute and
// reads the target: the value read before means the change was not made; any other value
// means it was, and the atomic returns the value noted without changing anything. Exact as
// long as nothing else changed the target in between; IBTA's atomicity holds only among the
// device's own atomics (IBV_ATOMIC_HCA), and a crash between the note and the change (a few
// instructions) is far less likely than one after it, which is what any other value is taken
// for. Read back as hostile input: a QP's region is writable by the QP's owner, and a forged
// intent only ever chooses between the two outcomes one of that owner's own atomics could
// have had (the target changed, or left as it is and the noted value returned).
#pragma once

#include <atomic>
#include <cstdint>

namespace wharf {

// What a remote atomic does to the 8 bytes it reads (IBA 9.4.5).
struct AtomicChange {
  bool fetch_add;        // fetch-and-add; else compare-and-swap
  uint64_t compare_add;  // the addend, or the value compared
  uint64_t swap;
  // The value the atomic leaves where it read `orig`.
  uint64_t next(uint64_t orig) const {
    return fetch_add ? orig + compare_add : orig == compare_add ? swap : orig;
  }
};

constexpr uint32_t kAtomicIntentNone = 0;
constexpr uint32_t kAtomicIntentNoted = 1;

struct AtomicIntent {
  uint32_t state;  // kAtomicIntentNone or kAtomicIntentNoted, stored last (release)
  uint32_t id;     // the request: its send-ring index (one host) or its PSN (across hosts)
  uint64_t orig;   // the value the atomic read before its compare-and-swap

  void note(uint32_t request, uint64_t read) {
    id = request;
    orig = read;
    std::atomic_ref<uint32_t>(state).store(kAtomicIntentNoted, std::memory_order_release);
  }
  // The request's outcome is kept elsewhere now (its result remembered, or its work request
  // gone from its ring): the note no longer applies.
  void clear() {
    std::atomic_ref<uint32_t>(state).store(kAtomicIntentNone, std::memory_order_release);
  }
  // Whether a previous process noted request `request`, and the target now holding `now`
  // says it made the change: then *result is what the atomic returned.
  bool made_before(uint32_t request, uint64_t now, uint64_t* result) const {
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != kAtomicIntentNoted || id != request ||
        now == orig)
      return false;
    *result = orig;
    return true;
  }
};
static_assert(sizeof(AtomicIntent) == 16);

}  // namespace wharf
