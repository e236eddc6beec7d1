#include "router/kept_cm_ids.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <type_traits>

#include "common/clock.h"
#include "common/fnv.h"
#include "common/private_file.h"
#include "common/unique_fd.h"
#include "router/cm_objects.h"

namespace wharf::router {

static_assert(std::is_trivially_copyable_v<KeptCmId>);

struct KeptCmIds::Copy {
  uint64_t sequence;
  KeptCmId id;
  uint32_t check;
  uint32_t pad;
};
struct KeptCmIds::Slot {
  Copy copies[2];
};

namespace {

constexpr char kMagic[8] = {'W', 'H', 'A', 'R', 'F', 'C', 'M', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t record_size;
  uint32_t slots;
  uint32_t reserved;
};

Header this_layout() {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.record_size = sizeof(KeptCmId);
  h.slots = KeptCmIds::kSlots;
  return h;
}

uint32_t checksum(uint64_t sequence, const KeptCmId& id) {
  uint8_t bytes[sizeof(sequence) + sizeof(id)];
  std::memcpy(bytes, &sequence, sizeof(sequence));
  std::memcpy(bytes + sizeof(sequence), &id, sizeof(id));
  return fnv1a32(std::span<const uint8_t>(bytes));
}

}  // namespace

KeptCmIds::~KeptCmIds() { close(); }

void KeptCmIds::close() {
  if (map_ != nullptr) ::munmap(map_, kPage + sizeof(Slot) * kSlots);
  map_ = nullptr;
  free_.clear();
  left_.clear();
}

KeptCmIds::Slot* KeptCmIds::slot(uint32_t i) const {
  return reinterpret_cast<Slot*>(map_ + kPage) + i;
}

const KeptCmIds::Copy* KeptCmIds::current(uint32_t i) const {
  const Copy* best = nullptr;
  for (const Copy& c : slot(i)->copies) {
    if (c.check != checksum(c.sequence, c.id)) continue;
    if (best == nullptr || c.sequence > best->sequence) best = &c;
  }
  return best;
}

int KeptCmIds::open(const std::string& path) {
  opened_ns_ = now_ns();
  if (path.empty()) return 0;
  const size_t len = kPage + sizeof(Slot) * kSlots;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return errno;
  // Only a regular file of this user that nobody else may read or write is trusted; anything
  // else is replaced.
  bool fresh = st.st_size == 0;
  if (!is_private_file(st)) {
    if (::unlink(path.c_str()) != 0) return errno;
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid()) return errno;
    fresh = true;
  }
  if (st.st_size != static_cast<off_t>(len)) fresh = true;
  // Emptied first: a file of another size is started afresh, all zeros.
  if (fresh &&
      (::ftruncate(fd.get(), 0) != 0 || ::ftruncate(fd.get(), static_cast<off_t>(len)) != 0))
    return errno;
  void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (m == MAP_FAILED) return errno;
  map_ = static_cast<uint8_t*>(m);
  const Header mine = this_layout();
  if (!fresh && std::memcmp(map_, &mine, sizeof(mine)) != 0) {
    std::memset(map_, 0, len);  // another layout: nothing of it is read
    fresh = true;
  }
  std::memcpy(map_, &mine, sizeof(mine));
  for (uint32_t i = kSlots; i-- > 0;) {
    const Copy* c = fresh ? nullptr : current(i);
    if (c == nullptr || c->id.comm == 0) {
      free_.push_back(i);
      continue;
    }
    left_.push_back(Left{i, c->id});
  }
  return 0;
}

uint32_t KeptCmIds::keep(uint32_t i, const KeptCmId& r) {
  if (map_ == nullptr) return kNoSlot;
  if (i == kNoSlot) {
    if (free_.empty()) return kNoSlot;
    i = free_.back();
    free_.pop_back();
  }
  Slot* s = slot(i);
  const Copy* now = current(i);
  const uint64_t sequence = now != nullptr ? now->sequence + 1 : 1;
  // The older copy (or a torn one) is written; the newer stays intact meanwhile.
  Copy& out = now == &s->copies[0] ? s->copies[1] : s->copies[0];
  out.sequence = sequence;
  out.id = r;
  out.check = checksum(sequence, r);
  return i;
}

void KeptCmIds::release(uint32_t i) {
  if (map_ == nullptr || i == kNoSlot) return;
  keep(i, KeptCmId{});
  free_.push_back(i);
}

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
