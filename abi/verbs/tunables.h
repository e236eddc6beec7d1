// The library's tunables: durations the application's environment may set, in microseconds
// (docs/OPERATIONS.md lists them). Each is read once, on first use.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace wharf::abi {

// `name` from the environment in microseconds (default_us when unset), in nanoseconds.
inline uint64_t env_us_as_ns(const char* name, uint64_t default_us) {
  const char* env = getenv(name);
  return (env != nullptr ? strtoull(env, nullptr, 10) : default_us) * 1000;
}

// How long a blocking ibv_get_cq_event spins before it sleeps: WHARF_EVENT_SPIN_US (default
// 20 us, about the CPU a sleep and wake-up cost here; 0 sleeps at once). Spinning no longer
// than a wake-up costs at most doubles the CPU a wait uses, and an event that comes within
// the budget is taken without the sleep and the wake-up.
inline uint64_t event_spin_ns() {
  static const uint64_t ns = env_us_as_ns("WHARF_EVENT_SPIN_US", 20);
  return ns;
}

// How long a thread that has polled only empty CQs for 1 ms naps on the CQ it polls, and the
// longest nap of an empty poll in the CQ's bulk window (cq_verbs.cc, bulk_nap):
// WHARF_POLL_NAP_US (default 100 us; 0: never, it yields).
inline uint64_t poll_nap_ns() {
  static const uint64_t ns = env_us_as_ns("WHARF_POLL_NAP_US", 100);
  return ns;
}

// How long an express line may go unserviced before the library's helper thread services it:
// WHARF_EXPRESS_IDLE_US (default 1000 us; at least 100 us, the helper's wake-ups being its
// cost). The helper sleeps that long between rounds, so the peer waits up to about twice it
// for the acknowledgement of a Message when this process neither polls, posts nor waits on a
// completion channel.
inline uint64_t express_idle_ns() {
  static const uint64_t ns = [] {
    const uint64_t v = env_us_as_ns("WHARF_EXPRESS_IDLE_US", 1000);
    return v < 100'000 ? 100'000 : v;
  }();
  return ns;
}

// How often an empty CQ's polls read its express lines while they bring nothing:
// WHARF_EXPRESS_POLL_US (default 5 us; 0: at every poll). A read is a system call: a thread
// polling in a loop that makes one at every poll leaves the routers, which carry the QPs'
// other work, little of a small machine's CPU (UCX's rendezvous between hosts ran 2-3x
// slower on two cores). Lines that brought something in the last 100 us are read at every
// poll, so a conversation on them waits for no period.
inline uint64_t express_poll_ns() {
  static const uint64_t ns = env_us_as_ns("WHARF_EXPRESS_POLL_US", 5);
  return ns;
}

// How long a QP that posted work its express line does not carry (anything but SEND and
// SEND_WITH_IMM: a READ, WRITE or atomic for the routers) keeps its SENDs off the line too:
// WHARF_EXPRESS_HOLD_US (default 10000 us; 0: never). Every change of path waits for the other
// path's work to be acknowledged or retired, and a router woken for each one-sided operation
// between line messages costs more than the line saves (UCX's rendezvous: SEND, READ, SEND); a QP
// that only sends stays on its line. A QP whose peer READs its memory in long messages through
// the routers holds its SENDs there the same way (express.cc, peer_reads_in_bulk).
inline uint64_t express_hold_ns() {
  static const uint64_t ns = env_us_as_ns("WHARF_EXPRESS_HOLD_US", 10000);
  return ns;
}

}  // namespace wharf::abi
