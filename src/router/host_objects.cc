#include "router/host_objects.h"

namespace wharf::router {
namespace {

constexpr uint32_t kMaxIndex = 0xffffff;  // keys' index and SRQ numbers are 24 bits

}  // namespace

uint32_t HostObjects::add_key(Mr* mr) {
  for (;;) {
    rng_state_ = rng_state_ * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's LCG
    const uint32_t key = (next_key_index_ << 8) | static_cast<uint32_t>(rng_state_ >> 56);
    next_key_index_ = next_key_index_ >= kMaxIndex ? 1 : next_key_index_ + 1;
    if (keys_.emplace(key, mr).second) return key;
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
