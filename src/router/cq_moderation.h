// CQ event moderation (ibv_modify_cq, IBV_CQ_ATTR_MODERATE): a CQ armed for events raises
// one only once `count` completions it is armed for have arrived, or `period_us`
// microseconds after the first of them, whichever comes first; a limit of 0 is not applied,
// and with both 0 every such completion raises the event at once (no moderation). Pure: the
// router holds the completions (router/cq_events.cc) and passes the time in.
#pragma once

#include <cstdint>

namespace wharf::router {

class CqModeration {
 public:
  void set(uint16_t count, uint16_t period_us) {
    count_ = count;
    period_us_ = period_us;
  }
  bool active() const { return count_ > 1 || period_us_ != 0; }
  uint32_t held() const { return held_; }

  // A completion the CQ is armed for arrived at now_ns: true when the event is due at once.
  bool hold(uint64_t now_ns) {
    if (held_++ == 0) first_ns_ = now_ns;
    return !active() || (count_ != 0 && held_ >= count_);
  }
  // When the held completions' event falls due by time: UINT64_MAX with none held, or
  // without a period.
  uint64_t due_ns() const {
    if (held_ == 0 || period_us_ == 0) return UINT64_MAX;
    return first_ns_ + uint64_t{period_us_} * 1000;
  }
  // The event was raised: the count starts again.
  void fired() { held_ = 0; }

 private:
  uint16_t count_ = 0;
  uint16_t period_us_ = 0;
  uint32_t held_ = 0;
  uint64_t first_ns_ = 0;
};

}  // namespace wharf::router
