// A file of fixed-size records that outlives the router process (issue #23), the one way the
// router keeps what a new process must find after a crash: router/kept_cm_ids.h (rdma_cm ids)
// and router/kept_accounting.h (containers' accounting) are built on it.
//
// Layout (this host's byte order; the file is the router's alone, mode 0600):
//   Header (one page): magic (8 bytes), version u32, record size u32, slot count u32, 0 u32.
//   `slots` slots of two copies each: {sequence u64, record (padded to 8 bytes), FNV-1a of the
//   sequence and the record u32, pad u32}.
// A slot is rewritten in its older (or torn) copy, so a process killed while writing leaves the
// other; a reader takes the newer copy whose checksum holds. A file of another layout, or one
// that is not a private regular file of this user (common/private_file.h), starts afresh, all
// zeros. A slot is free when its record is all zeros, torn, or one its user does not count as
// in use. The records are the router's own but may be torn: their users check what they read.
// Not thread-safe: the router thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace wharf::router {

class KeptSlots {
 public:
  struct Layout {
    char magic[8];
    uint32_t version;
    uint32_t record_size;  // bytes of one record (a multiple of 8)
    uint32_t slots;
  };

  static constexpr uint32_t kNoSlot = ~uint32_t{0};

  KeptSlots() = default;
  ~KeptSlots();
  KeptSlots(const KeptSlots&) = delete;
  KeptSlots& operator=(const KeptSlots&) = delete;

  // Maps `path` for `layout`. 0 or an errno (nothing is kept then). Each intact record a
  // previous process left is offered to `take` with its slot; the slots `take` returns true
  // for stay in use, every other slot is free.
  int open(const std::string& path, const Layout& layout,
           const std::function<bool(uint32_t slot, const void* record)>& take);
  bool mapped() const { return map_ != nullptr; }
  // Unmaps the file as it is (what the process leaves, as if it died now).
  void close();

  // Writes `record` in slot i, or in a free slot if i is kNoSlot; the slot, or kNoSlot when
  // none is free or nothing is mapped.
  uint32_t keep(uint32_t i, const void* record);
  // Writes slot i as all zeros and frees it (kNoSlot: nothing).
  void release(uint32_t i);

  // The record of slot i's newer intact copy (layout.record_size bytes), or nullptr if
  // neither copy is intact (never written, or torn).
  const void* current(uint32_t i) const;
  // A copy of a record `take` or current() gave, as its user's type.
  template <class Record>
  static Record read(const void* record) {
    static_assert(std::is_trivially_copyable_v<Record>);
    Record r;
    std::memcpy(&r, record, sizeof(r));
    return r;
  }

 private:
  // Writes `record` (layout.record_size bytes) as slot i's newer copy.
  void write(uint32_t i, const void* record);
  uint8_t* copy(uint32_t slot, int which) const;
  size_t copy_size() const { return 16 + layout_.record_size; }
  size_t length() const;

  Layout layout_{};
  uint8_t* map_ = nullptr;
  std::vector<uint32_t> free_;
};

}  // namespace wharf::router
