#include "router/kept_slots.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "common/fnv.h"
#include "common/private_file.h"
#include "common/unique_fd.h"

namespace wharf::router {

namespace {

constexpr size_t kPage = 4096;

struct Header {
  KeptSlots::Layout layout;
  uint32_t reserved;
};
static_assert(sizeof(Header) == 24);

// A copy: {sequence u64, record, check u32, pad u32}.
constexpr size_t kRecordOff = 8;

uint32_t checksum(const uint8_t* copy, uint32_t record_size) {
  return fnv1a32(std::span<const uint8_t>(copy, kRecordOff + record_size));
}

}  // namespace

KeptSlots::~KeptSlots() { close(); }

size_t KeptSlots::length() const { return kPage + 2 * copy_size() * layout_.slots; }

void KeptSlots::close() {
  if (map_ != nullptr) ::munmap(map_, length());
  map_ = nullptr;
  free_.clear();
}

uint32_t KeptSlots::keep(uint32_t i, const void* record) {
  if (map_ == nullptr) return kNoSlot;
  if (i == kNoSlot) {
    if (free_.empty()) return kNoSlot;
    i = free_.back();
    free_.pop_back();
  }
  write(i, record);
  return i;
}

void KeptSlots::release(uint32_t i) {
  if (map_ == nullptr || i == kNoSlot) return;
  const std::vector<uint8_t> zeros(layout_.record_size);
  write(i, zeros.data());
  free_.push_back(i);
}

uint8_t* KeptSlots::copy(uint32_t slot, int which) const {
  return map_ + kPage + (2 * static_cast<size_t>(slot) + static_cast<size_t>(which)) * copy_size();
}

const void* KeptSlots::current(uint32_t i) const {
  const uint8_t* best = nullptr;
  uint64_t best_sequence = 0;
  for (int which = 0; which < 2; ++which) {
    const uint8_t* c = copy(i, which);
    uint64_t sequence = 0;
    uint32_t check = 0;
    std::memcpy(&sequence, c, sizeof(sequence));
    std::memcpy(&check, c + kRecordOff + layout_.record_size, sizeof(check));
    if (check != checksum(c, layout_.record_size)) continue;
    if (best == nullptr || sequence > best_sequence) {
      best = c;
      best_sequence = sequence;
    }
  }
  return best != nullptr ? best + kRecordOff : nullptr;
}

void KeptSlots::write(uint32_t i, const void* record) {
  const void* now = current(i);
  uint64_t sequence = 1;
  int which = 0;
  if (now != nullptr) {
    const uint8_t* newer = static_cast<const uint8_t*>(now) - kRecordOff;
    std::memcpy(&sequence, newer, sizeof(sequence));
    ++sequence;
    which = newer == copy(i, 0) ? 1 : 0;  // the older copy; the newer stays intact meanwhile
  }
  uint8_t* out = copy(i, which);
  std::memcpy(out, &sequence, sizeof(sequence));
  std::memcpy(out + kRecordOff, record, layout_.record_size);
  const uint32_t check = checksum(out, layout_.record_size);
  std::memcpy(out + kRecordOff + layout_.record_size, &check, sizeof(check));
}

int KeptSlots::open(const std::string& path, const Layout& layout,
                    const std::function<bool(uint32_t slot, const void* record)>& take) {
  close();
  layout_ = layout;
  if (layout.record_size % 8 != 0) return EINVAL;
  const size_t len = length();
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return errno;
  // Only a regular file of this user that nobody else may read or write is trusted; anything
  // else is replaced.
  bool afresh = st.st_size != static_cast<off_t>(len);
  if (!is_private_file(st)) {
    if (::unlink(path.c_str()) != 0) return errno;
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid()) return errno;
    afresh = true;
  }
  // Emptied first: a file of another size is started afresh, all zeros.
  if (afresh &&
      (::ftruncate(fd.get(), 0) != 0 || ::ftruncate(fd.get(), static_cast<off_t>(len)) != 0))
    return errno;
  void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (m == MAP_FAILED) return errno;
  map_ = static_cast<uint8_t*>(m);
  Header mine{};
  mine.layout = layout;
  if (!afresh && std::memcmp(map_, &mine, sizeof(mine)) != 0) {
    std::memset(map_, 0, len);  // another layout: nothing of it is read
    afresh = true;
  }
  std::memcpy(map_, &mine, sizeof(mine));
  for (uint32_t i = layout.slots; i-- > 0;) {  // the lowest slots taken first
    const void* record = afresh ? nullptr : current(i);
    if (record == nullptr || !take(i, record)) free_.push_back(i);
  }
  return 0;
}

}  // namespace wharf::router
