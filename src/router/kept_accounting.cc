#include "router/kept_accounting.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common/clock.h"

namespace wharf::router {

namespace {

constexpr size_t kNameBytes = 64;  // a name and its NUL: wider than proto::LongName's 63

// One container's record. Plain bytes.
struct KeptTraffic {
  uint64_t netns_ino;  // 0: a free slot
  char tenant[kNameBytes];
  char network[kNameBytes];
  char name[kNameBytes];
  uint64_t tx_msgs, tx_bytes, rx_msgs, rx_bytes, errors, express_msgs, throttled_ns;
  uint64_t tx_by_opcode[shm::kCountedOpcodes];
  uint64_t errors_by_status[shm::kCountedStatuses];
};
static_assert(std::is_trivially_copyable_v<KeptTraffic> && sizeof(KeptTraffic) % 8 == 0);

KeptSlots::Layout this_layout() {
  KeptSlots::Layout l{};
  std::memcpy(l.magic, "WHARFACC", sizeof(l.magic));
  l.version = 1;
  l.record_size = sizeof(KeptTraffic);
  l.slots = KeptAccounting::kSlots;
  return l;
}

void put_name(char (&out)[kNameBytes], const std::string& s) {
  std::memset(out, 0, kNameBytes);
  std::memcpy(out, s.data(), std::min(s.size(), kNameBytes - 1));
}

std::string get_name(const char (&in)[kNameBytes]) {
  return {in, strnlen(in, kNameBytes - 1)};  // a torn or foreign name ends at the field
}

KeptTraffic to_record(uint64_t netns_ino, const KeptAccounting::Account& a) {
  KeptTraffic r{};
  r.netns_ino = netns_ino;
  put_name(r.tenant, a.tenant);
  put_name(r.network, a.network);
  put_name(r.name, a.name);
  const Traffic& t = a.traffic;
  r.tx_msgs = t.tx_msgs;
  r.tx_bytes = t.tx_bytes;
  r.rx_msgs = t.rx_msgs;
  r.rx_bytes = t.rx_bytes;
  r.errors = t.errors;
  r.express_msgs = t.express_msgs;
  r.throttled_ns = t.throttled_ns;
  std::copy(t.tx_by_opcode.begin(), t.tx_by_opcode.end(), r.tx_by_opcode);
  std::copy(t.errors_by_status.begin(), t.errors_by_status.end(), r.errors_by_status);
  return r;
}

KeptAccounting::Account from_record(const KeptTraffic& r) {
  KeptAccounting::Account a;
  a.tenant = get_name(r.tenant);
  a.network = get_name(r.network);
  a.name = get_name(r.name);
  Traffic& t = a.traffic;
  t.tx_msgs = r.tx_msgs;
  t.tx_bytes = r.tx_bytes;
  t.rx_msgs = r.rx_msgs;
  t.rx_bytes = r.rx_bytes;
  t.errors = r.errors;
  t.express_msgs = r.express_msgs;
  t.throttled_ns = r.throttled_ns;
  std::copy(std::begin(r.tx_by_opcode), std::end(r.tx_by_opcode), t.tx_by_opcode.begin());
  std::copy(std::begin(r.errors_by_status), std::end(r.errors_by_status),
            t.errors_by_status.begin());
  return a;
}

}  // namespace

void KeptAccounting::close() {
  slots_.close();
  left_.clear();
}

int KeptAccounting::open(const std::string& path) {
  opened_ns_ = now_ns();
  if (path.empty()) return 0;
  return slots_.open(path, this_layout(), [this](uint32_t i, const void* record) {
    const auto r = KeptSlots::read<KeptTraffic>(record);
    if (r.netns_ino == 0) return false;
    left_.push_back(Left{i, r.netns_ino, from_record(r)});
    return true;
  });
}

uint32_t KeptAccounting::keep(uint32_t i, uint64_t netns_ino, const Account& a) {
  if (!slots_.mapped()) return kNoSlot;  // nothing to encode for
  const KeptTraffic r = to_record(netns_ino, a);
  return slots_.keep(i, &r);
}

void KeptAccounting::release(uint32_t i) { slots_.release(i); }

bool KeptAccounting::claim(uint64_t netns_ino, Account* a, uint32_t* slot) {
  auto it = std::find_if(left_.begin(), left_.end(),
                         [&](const Left& l) { return l.netns_ino == netns_ino; });
  if (it == left_.end()) return false;
  *a = std::move(it->account);
  *slot = it->slot;
  left_.erase(it);
  return true;
}

std::vector<KeptAccounting::Account> KeptAccounting::drop_stale(uint64_t now) {
  std::vector<Account> gone;
  if (left_.empty() || now - opened_ns_ < kOrphanLifeNs) return gone;
  for (Left& l : left_) {
    release(l.slot);
    gone.push_back(std::move(l.account));
  }
  left_.clear();
  return gone;
}

}  // namespace wharf::router
