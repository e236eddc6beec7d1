#include "router/kept_remote_states.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "common/clock.h"
#include "common/private_file.h"
#include "common/unique_fd.h"
#include "rc/psn.h"

namespace wharf::router {

namespace {

constexpr char kMagic[8] = {'W', 'H', 'A', 'R', 'F', 'K', 'S', '1'};
// Changes whenever RemoteQpState's meaning changes at the same size (a new binary that reads
// an old file through another layout must start afresh: --upgrade may run one).
constexpr uint32_t kVersion = 4;
constexpr size_t kPage = 4096;

constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Header page, the active slots' tags (together, so that a start reads them in a few pages),
// the parked slots, then the active states, each on pages of its own (trim gives them back).
constexpr size_t kTagSize = 16;
constexpr size_t kActiveTagsOffset = kPage;
constexpr size_t kParkedStride = 64;
constexpr size_t kParkedOffset =
    round_up(kActiveTagsOffset + size_t{KeptRemoteStates::kActiveSlots} * kTagSize, kPage);
constexpr size_t kActiveStride = round_up(sizeof(RemoteQpState), kPage);
constexpr size_t kActiveOffset =
    round_up(kParkedOffset + size_t{KeptRemoteStates::kParkedSlots} * kParkedStride, kPage);
constexpr size_t kFileSize = kActiveOffset + size_t{KeptRemoteStates::kActiveSlots} * kActiveStride;
static_assert(alignof(RemoteQpState) <= kPage);

}  // namespace

struct KeptRemoteStates::Header {
  char magic[8];
  uint32_t version;
  uint32_t state_size;  // sizeof(RemoteQpState)
  uint32_t active_slots, active_stride;
  uint32_t parked_slots, parked_stride;
  uint32_t incarnation;
};

// This binary's layout; the incarnation is the file's own.
KeptRemoteStates::Header KeptRemoteStates::this_layout(uint32_t incarnation) {
  static_assert(sizeof(Header) == 8 + 7 * sizeof(uint32_t), "no padding: compared by memcmp");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.state_size = sizeof(RemoteQpState);
  h.active_slots = kActiveSlots;
  h.active_stride = kActiveStride;
  h.parked_slots = kParkedSlots;
  h.parked_stride = kParkedStride;
  h.incarnation = incarnation;
  return h;
}

struct KeptRemoteStates::ParkedSlot {
  Tag tag;
  ParkedRemoteQp parked;
};

KeptRemoteStates::~KeptRemoteStates() {
  if (map_ != nullptr) ::munmap(map_, map_len_);
}

KeptRemoteStates::Tag* KeptRemoteStates::active_tag(const uint8_t* map, uint32_t i) {
  static_assert(sizeof(Tag) == kTagSize);
  return reinterpret_cast<Tag*>(const_cast<uint8_t*>(map) + kActiveTagsOffset +
                                size_t{i} * kTagSize);
}

RemoteQpState* KeptRemoteStates::active(const uint8_t* map, uint32_t i) {
  return std::launder(reinterpret_cast<RemoteQpState*>(const_cast<uint8_t*>(map) + kActiveOffset +
                                                       size_t{i} * kActiveStride));
}

KeptRemoteStates::ParkedSlot* KeptRemoteStates::parked(const uint8_t* map, uint32_t i) {
  return reinterpret_cast<ParkedSlot*>(const_cast<uint8_t*>(map) + kParkedOffset +
                                       size_t{i} * kParkedStride);
}

void KeptRemoteStates::tag(Tag* t, uint32_t qpn, uint32_t used) {
  t->sequence = ++sequence_;
  t->qpn = qpn;
  // Last, after the slot's content: a process killed before this leaves the slot as it was.
  __atomic_store_n(&t->used, used, __ATOMIC_RELEASE);
}

namespace {

// A read-only private view of the file a previous process left at `path`, if it is one this
// router may trust: a regular file of its user that nobody else may read or write, of this
// layout's size. Null otherwise.
const uint8_t* map_previous(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !is_private_file(st) ||
      st.st_size != static_cast<off_t>(kFileSize))
    return nullptr;
  void* m = ::mmap(nullptr, kFileSize, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  return m == MAP_FAILED ? nullptr : static_cast<const uint8_t*>(m);
}

// A continuation read from a file a crash may have torn: PSNs masked to 24 bits, the
// requester's host within the cluster. False if it cannot be used.
bool bounded(ParkedRemoteQp* c, size_t hosts) {
  if (c->requester_host < -1 || c->requester_host >= static_cast<int>(hosts)) return false;
  c->next_psn &= rc::kPsnMask;
  c->epsn &= rc::kPsnMask;
  c->msn &= rc::kPsnMask;
  c->parked = true;
  return true;
}

}  // namespace

int KeptRemoteStates::open(const std::string& path, uint32_t fresh_incarnation, size_t hosts) {
  opened_ns_ = now_ns();
  incarnation_ = fresh_incarnation;
  hosts_ = hosts;
  const uint8_t* old = path.empty() ? nullptr : map_previous(path);
  // The new file is made whole under a temporary name and renamed over the old one, so that
  // a process killed while starting leaves one or the other.
  const std::string tmp = path + ".new";
  UniqueFd fd;
  auto fail = [&](int err) {
    if (fd.valid()) ::unlink(tmp.c_str());
    if (old != nullptr) ::munmap(const_cast<uint8_t*>(old), kFileSize);
    return err;
  };
  if (!path.empty()) {
    ::unlink(tmp.c_str());
    fd.reset(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid() || ::ftruncate(fd.get(), static_cast<off_t>(kFileSize)) != 0)
      return fail(errno);
  }
  void* m = fd.valid() ? ::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0)
                       : ::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return fail(errno);
  map_ = static_cast<uint8_t*>(m);
  map_len_ = kFileSize;
  persistent_ = fd.valid();
  free_active_.clear();
  for (uint32_t i = kActiveSlots; i-- > 0;) free_active_.push_back(i);
  free_parked_.clear();
  for (uint32_t i = kParkedSlots; i-- > 0;) free_parked_.push_back(i);
  if (old != nullptr) {
    adopt_previous(old);
    ::munmap(const_cast<uint8_t*>(old), kFileSize);
  }
  static_assert(sizeof(Header) <= kPage);
  *reinterpret_cast<Header*>(map_) = this_layout(incarnation_);
  if (persistent_ && ::rename(tmp.c_str(), path.c_str()) != 0) return errno;
  if (!orphans_.empty())
    spdlog::info("router state of the previous process: {} QP(s) to continue, incarnation {:#x}",
                 orphans_.size(), incarnation_);
  return 0;
}

// If the old file's header names this layout: its incarnation, and per QP its latest slot
// (a parked form bounded, an active state as it was), placed in this file's slots (so that a
// process killed again before its QPs are restored still leaves them).
void KeptRemoteStates::adopt_previous(const uint8_t* old) {
  const auto* h = reinterpret_cast<const Header*>(old);
  const Header mine = this_layout(h->incarnation);
  if (h->incarnation == 0 || std::memcmp(h, &mine, sizeof(mine)) != 0) return;
  incarnation_ = h->incarnation;
  struct Latest {
    uint64_t sequence;
    bool active;
    uint32_t index;
  };
  std::unordered_map<uint32_t, Latest> latest;  // each QPN's latest slot
  auto consider = [&](const Tag& t, bool is_active, uint32_t i) {
    if (t.used != 1 || t.qpn == 0 || t.qpn > rc::kPsnMask) return;
    auto [it, fresh] = latest.try_emplace(t.qpn, Latest{t.sequence, is_active, i});
    if (!fresh && t.sequence > it->second.sequence) it->second = Latest{t.sequence, is_active, i};
    sequence_ = std::max(sequence_, t.sequence);  // slots written from now on are later
  };
  for (uint32_t i = 0; i < kActiveSlots; ++i) consider(*active_tag(old, i), true, i);
  for (uint32_t i = 0; i < kParkedSlots; ++i) consider(parked(old, i)->tag, false, i);
  for (const auto& [qpn, at] : latest) {
    if (!at.active) {
      ParkedRemoteQp p = parked(old, at.index)->parked;
      if (!bounded(&p, hosts_)) continue;
      keep_parked(qpn, p);
      orphans_[qpn] = Orphan{nullptr, p};
      continue;
    }
    // Kept whole: its continuation depends on the rings, which only its restored QP shows
    // (claim_orphan). The old file had no more active slots than this one has free.
    if (RemoteQpState* st = take_active(qpn, *active(old, at.index)); st != nullptr)
      orphans_[qpn] = Orphan{st, {}};
  }
}

RemoteQpState* KeptRemoteStates::take_active(uint32_t qpn, const RemoteQpState& initial) {
  if (free_active_.empty()) return nullptr;
  const uint32_t i = free_active_.back();
  free_active_.pop_back();
  RemoteQpState* st = new (active(map_, i)) RemoteQpState(initial);
  tag(active_tag(map_, i), qpn, 1);
  return st;
}

bool KeptRemoteStates::holds(const RemoteQpState* st) const {
  const auto* p = reinterpret_cast<const uint8_t*>(st);
  return map_ != nullptr && p >= map_ + kActiveOffset && p < map_ + kFileSize;
}

void KeptRemoteStates::release_active(RemoteQpState* st) {
  const auto i = static_cast<uint32_t>(
      static_cast<size_t>(reinterpret_cast<uint8_t*>(st) - map_ - kActiveOffset) / kActiveStride);
  tag(active_tag(map_, i), 0, 0);
  free_active_.push_back(i);
}

void KeptRemoteStates::keep_parked(uint32_t qpn, const ParkedRemoteQp& p) {
  auto [it, fresh] = parked_slots_.try_emplace(qpn, 0);
  if (fresh) {
    if (free_parked_.empty()) {
      parked_slots_.erase(it);
      return;
    }
    it->second = free_parked_.back();
    free_parked_.pop_back();
  }
  parked(map_, it->second)->parked = p;
  tag(&parked(map_, it->second)->tag, qpn, 1);
}

void KeptRemoteStates::release_parked(uint32_t qpn) {
  auto it = parked_slots_.find(qpn);
  if (it == parked_slots_.end()) return;
  tag(&parked(map_, it->second)->tag, 0, 0);
  free_parked_.push_back(it->second);
  parked_slots_.erase(it);
}

bool KeptRemoteStates::claim_orphan(uint32_t qpn, RemoteQpState::RingTails tails,
                                    const FinishCompletions& finish, RemoteQpState** active_state,
                                    ParkedRemoteQp* parked_form) {
  auto it = orphans_.find(qpn);
  if (it == orphans_.end()) return false;
  const Orphan o = it->second;
  orphans_.erase(it);
  *active_state = nullptr;
  *parked_form = o.parked;
  if (o.active == nullptr) return true;
  RemoteQpState::Continuation c = o.active->continuation(tails);
  if (!bounded(&c.at, hosts_)) {
    release_active(o.active);
    return false;
  }
  // The completions first: a process killed before its continuation is kept finds them done
  // (in their CQs) and finishes nothing twice. Then the continuation goes in a slot of its own,
  // tagged later than the old one (a process killed in between continues from it).
  finish(c.unfinished);
  RemoteQpState go_on(c.at);
  go_on.responder.keep_atomics_of(o.active->responder);
  RemoteQpState* st = take_active(qpn, go_on);
  release_active(o.active);
  if (st == nullptr) {  // every slot taken: without its atomic results
    *parked_form = c.at;
    return true;
  }
  *active_state = st;
  return true;
}

void KeptRemoteStates::drop_stale_orphans(uint64_t now) {
  if (orphans_.empty() || now - opened_ns_ < kOrphanLifeNs) return;
  spdlog::info("{} QP(s) of the previous router process were not restored; forgotten",
               orphans_.size());
  for (const auto& [qpn, o] : orphans_) {
    if (o.active != nullptr)
      release_active(o.active);
    else
      release_parked(qpn);
  }
  orphans_.clear();
}

void KeptRemoteStates::trim() {
  std::vector<uint32_t> free = free_active_;
  std::sort(free.begin(), free.end());
  const int advice = persistent_ ? MADV_REMOVE : MADV_DONTNEED;
  // One call per run of free slots: their pages go back to the system (a file's are punched).
  for (size_t i = 0; i < free.size();) {
    size_t j = i + 1;
    while (j < free.size() && free[j] == free[j - 1] + 1) ++j;
    ::madvise(active(map_, free[i]), (j - i) * kActiveStride, advice);
    i = j;
  }
}

}  // namespace wharf::router
