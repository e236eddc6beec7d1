#include "router/mr_access.h"

#include <errno.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "common/stream_copy.h"

namespace wharf::router {
namespace {

constexpr uint64_t kBounce = 64 * 1024;

int cma_read(pid_t pid, uint64_t remote, void* local, uint64_t len) {
  iovec l{local, len}, r{reinterpret_cast<void*>(remote), len};
  ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
  return n == static_cast<ssize_t>(len) ? 0 : kSourceFault;
}

int cma_write(pid_t pid, uint64_t remote, const void* local, uint64_t len) {
  iovec l{const_cast<void*>(local), len}, r{reinterpret_cast<void*>(remote), len};
  ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
  return n == static_cast<ssize_t>(len) ? 0 : EFAULT;
}

// Copies len bytes between two single segments at the given offsets.
int copy_piece(const Segment& s, uint64_t soff, const Segment& d, uint64_t doff, uint64_t len,
               CopyHint hint) {
  if (s.local != nullptr && d.local != nullptr) {
    if (hint == CopyHint::kStreaming)
      stream_copy(d.local + doff, s.local + soff, len);
    else
      std::memcpy(d.local + doff, s.local + soff, len);
    return 0;
  }
  if (s.local != nullptr) return cma_write(d.pid, d.remote + doff, s.local + soff, len);
  if (d.local != nullptr) return cma_read(s.pid, s.remote + soff, d.local + doff, len);
  static thread_local uint8_t bounce[kBounce];
  for (uint64_t done = 0; done < len;) {
    uint64_t n = std::min(kBounce, len - done);
    if (int err = cma_read(s.pid, s.remote + soff + done, bounce, n)) return err;
    if (int err = cma_write(d.pid, d.remote + doff + done, bounce, n)) return err;
    done += n;
  }
  return 0;
}

}  // namespace

bool SegmentList::push(const Segment& s) {
  if (s.len == 0) return true;
  if (count == kMaxSegments) return false;
  seg[count++] = s;
  total += s.len;
  return true;
}

bool append_mr_range(SegmentList* list, const Mr& mr, uint64_t va, uint64_t len) {
  uint64_t addr = va - mr.iova + mr.addr;  // application virtual address
  uint64_t end = addr + len;
  uint64_t mstart = mr.mapped_start, mend = mr.mapped_start + mr.mapped_len;
  if (mr.mapped_len == 0 || end <= mstart || addr >= mend)
    return list->push(Segment{nullptr, mr.pid, addr, len});
  bool ok = true;
  if (addr < mstart) ok &= list->push(Segment{nullptr, mr.pid, addr, mstart - addr});
  uint64_t body_start = std::max(addr, mstart), body_end = std::min(end, mend);
  ok &= list->push(Segment{mr.mapping + (body_start - mstart), 0, 0, body_end - body_start});
  if (end > mend) ok &= list->push(Segment{nullptr, mr.pid, mend, end - mend});
  return ok;
}

int copy_spans(const Segment* src, uint32_t nsrc, uint64_t soff, const Segment* dst, uint32_t ndst,
               uint64_t doff, uint64_t len, CopyHint hint) {
  uint32_t si = 0, di = 0;
  while (si < nsrc && soff >= src[si].len) soff -= src[si++].len;
  while (di < ndst && doff >= dst[di].len) doff -= dst[di++].len;
  while (len > 0 && si < nsrc && di < ndst) {
    const Segment& s = src[si];
    const Segment& d = dst[di];
    uint64_t n = std::min({len, s.len - soff, d.len - doff});
    if (int err = copy_piece(s, soff, d, doff, n, hint)) return err;
    len -= n;
    soff += n;
    doff += n;
    if (soff == s.len) ++si, soff = 0;
    if (doff == d.len) ++di, doff = 0;
  }
  return len == 0 ? 0 : EFAULT;
}

int copy_segments(const SegmentList& src, const SegmentList& dst, uint64_t len, CopyHint hint) {
  return copy_spans(src.seg, src.count, 0, dst.seg, dst.count, 0, len, hint);
}

uint64_t* mapped_u64(const Mr& mr, uint64_t va) {
  uint64_t addr = va - mr.iova + mr.addr;
  if (mr.mapped_len == 0 || addr < mr.mapped_start || addr + 8 > mr.mapped_start + mr.mapped_len)
    return nullptr;
  return reinterpret_cast<uint64_t*>(mr.mapping + (addr - mr.mapped_start));
}

int atomic_on_mr(const Mr& mr, uint64_t va, const AtomicChange& change, AtomicIntent* intent,
                 uint32_t request, uint64_t* orig) {
  if (uint64_t* p = mapped_u64(mr, va)) {
    uint64_t seen = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    if (intent->made_before(request, seen, orig)) return 0;
    for (;;) {
      const uint64_t next = change.next(seen);
      if (next == seen) break;  // nothing to write (a compare that failed, an add of 0)
      intent->note(request, seen);
      // A failed exchange leaves the value found in `seen`: noted again before the next try.
      if (__atomic_compare_exchange_n(p, &seen, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        break;
    }
    *orig = seen;
    return 0;
  }
  SegmentList remote, mine;
  if (!append_mr_range(&remote, mr, va, 8)) return EFAULT;
  mine.push(Segment{reinterpret_cast<uint8_t*>(orig), 0, 0, 8});
  if (copy_segments(remote, mine, 8) != 0) return EFAULT;
  if (intent->made_before(request, *orig, orig)) return 0;
  uint64_t next = change.next(*orig);
  if (next == *orig) return 0;
  intent->note(request, *orig);
  SegmentList val;
  val.push(Segment{reinterpret_cast<uint8_t*>(&next), 0, 0, 8});
  return copy_segments(val, remote, 8);
}

int atomic_store_on_mr(const Mr& mr, uint64_t va, uint64_t value) {
  if (uint64_t* p = mapped_u64(mr, va)) {
    __atomic_store_n(p, value, __ATOMIC_SEQ_CST);
    return 0;
  }
  SegmentList remote, mine;
  if (!append_mr_range(&remote, mr, va, 8)) return EFAULT;
  mine.push(Segment{reinterpret_cast<uint8_t*>(&value), 0, 0, 8});
  return copy_segments(mine, remote, 8) == 0 ? 0 : EFAULT;
}

SegmentList slice(const SegmentList& list, uint64_t off, uint64_t len) {
  SegmentList out;
  for (uint32_t i = 0; i < list.count && len != 0; ++i) {
    Segment s = list.seg[i];
    if (off >= s.len) {
      off -= s.len;
      continue;
    }
    if (s.local != nullptr)
      s.local += off;
    else
      s.remote += off;
    s.len = std::min(s.len - off, len);
    off = 0;
    len -= s.len;
    out.push(s);
  }
  return out;
}

uint8_t* contiguous_at(const SegmentList& list, uint64_t off, uint64_t len) {
  for (uint32_t i = 0; i < list.count; ++i) {
    const Segment& s = list.seg[i];
    if (off >= s.len) {
      off -= s.len;
      continue;
    }
    return s.local != nullptr && len <= s.len - off ? s.local + off : nullptr;
  }
  return nullptr;
}

}  // namespace wharf::router
