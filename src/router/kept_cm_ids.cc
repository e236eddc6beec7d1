#include "router/kept_cm_ids.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/clock.h"
#include "router/cm_objects.h"

namespace wharf::router {

static_assert(std::is_trivially_copyable_v<KeptCmId> && sizeof(KeptCmId) % 8 == 0);

namespace {

KeptSlots::Layout this_layout() {
  KeptSlots::Layout l{};
  std::memcpy(l.magic, "WHARFCM1", sizeof(l.magic));
  l.version = 1;
  l.record_size = sizeof(KeptCmId);
  l.slots = KeptCmIds::kSlots;
  return l;
}

}  // namespace

void KeptCmIds::close() {
  slots_.close();
  left_.clear();
}

int KeptCmIds::open(const std::string& path) {
  opened_ns_ = now_ns();
  if (path.empty()) return 0;
  return slots_.open(path, this_layout(), [this](uint32_t i, const void* record) {
    const auto id = KeptSlots::read<KeptCmId>(record);
    if (id.comm == 0) return false;
    left_.push_back(Left{i, id});
    return true;
  });
}

uint32_t KeptCmIds::keep(uint32_t i, const KeptCmId& r) { return slots_.keep(i, &r); }

void KeptCmIds::release(uint32_t i) { slots_.release(i); }

std::vector<KeptCmIds::Left> KeptCmIds::claim(uint64_t netns_ino, int32_t pid) {
  std::vector<Left> mine;
  auto theirs = std::stable_partition(left_.begin(), left_.end(), [&](const Left& l) {
    return l.id.netns_ino != netns_ino || l.id.pid != pid;
  });
  mine.assign(theirs, left_.end());
  left_.erase(theirs, left_.end());
  return mine;
}

bool KeptCmIds::disconnect_left(uint32_t comm, int32_t from, uint32_t sender_comm) {
  for (Left& l : left_) {
    KeptCmId& id = l.id;
    if (id.comm != comm || id.peer_host != from ||
        (id.peer_comm != 0 && id.peer_comm != sender_comm))
      continue;
    if (!closed_by_dreq(static_cast<CmState>(id.state))) return false;
    id.state = static_cast<uint8_t>(CmState::kClosed);
    id.peer_comm = 0;
    id.peer_left = 1;
    keep(l.slot, id);  // a process killed now leaves it so too
    return true;
  }
  return false;
}

void KeptCmIds::drop_stale(uint64_t now) {
  if (left_.empty() || now - opened_ns_ < kOrphanLifeNs) return;
  for (const Left& l : left_) release(l.slot);
  left_.clear();
}

}  // namespace wharf::router
