#include "router/host_objects.h"

#include <sys/random.h>

namespace wharf::router {
namespace {

constexpr uint32_t kMaxIndex = 0xffffff;  // SRQ numbers are 24 bits

}  // namespace

uint32_t HostObjects::add_key(Mr* mr) {
  for (;;) {
    uint32_t key = 0;
    // Blocks only before the kernel's pool is first seeded (early boot), never after.
    while (getrandom(&key, sizeof(key), 0) != static_cast<ssize_t>(sizeof(key))) {
    }
    if (key != 0 && key != UINT32_MAX && keys_.emplace(key, mr).second) return key;
  }
}

uint32_t HostObjects::add_srq(Srq* srq) {
  for (;;) {
    const uint32_t srqn = next_srqn_;
    next_srqn_ = next_srqn_ >= kMaxIndex ? 1 : next_srqn_ + 1;
    if (srqs_.emplace(srqn, srq).second) return srqn;
  }
}

}  // namespace wharf::router
