// Reaching registered memory from the router. A registration's pages that the library
// backed with a memfd are mapped here and copied with memcpy; the unaligned head and tail
// (and buffers that could not be backed) are reached with process_vm_readv/writev.
// Every range handed to these functions has already been bounds-checked against its MR.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>

#include "common/atomic_intent.h"
#include "common/stream_copy.h"
#include "router/objects.h"

namespace wharf::router {

// Plain data without default values, so that a SegmentList (made per work request and per
// packet) does not clear its 3 KiB of slots: make one with all four fields.
struct Segment {
  uint8_t* local;  // non-null: directly addressable
  pid_t pid;       // otherwise: address `remote` in process `pid`
  uint64_t remote;
  uint64_t len;
};

// Enough for kMaxSendSge SGEs each split into head, mapped body and tail, plus a GRH.
constexpr uint32_t kMaxSegments = 3 * 32 + 2;

struct SegmentList {
  Segment seg[kMaxSegments];  // seg[0, count) hold segments; the rest is not initialized
  uint32_t count = 0;
  uint64_t total = 0;
  bool push(const Segment& s);
};

// True if [va, va+len) (in the MR's iova space) lies inside the MR.
inline bool mr_contains(const Mr& mr, uint64_t va, uint64_t len) {
  return va >= mr.iova && len <= mr.length && va - mr.iova <= mr.length - len;
}

// Whether `mr` (what an rkey names: a registration or a window's binding, or nullptr) lets an
// access of `need` (IBV_ACCESS_REMOTE_*) to [va, va+len) arrive at responder QP `qpn` whose
// memory is `owner`'s in `pd` (an XRC target's: those of the SRQ the request names): owner's,
// in pd, allowing `need`, containing the range, and a type 2 window bound to that QP
// (C9-... 9.7.4.1, 10.6.7). The QP's own access flags are the caller's check.
inline bool remote_access_allowed(const Mr* mr, const Session* owner, const Pd* pd, uint32_t qpn,
                                  uint32_t need, uint64_t va, uint64_t len) {
  return mr != nullptr && mr->owner == owner && mr->pd == pd && (mr->access & need) &&
         mr_contains(*mr, va, len) && (mr->bound_qpn == 0 || mr->bound_qpn == qpn);
}

// Appends the segments covering [va, va+len) of mr (bounds already checked). False if the
// list is full.
bool append_mr_range(SegmentList* list, const Mr& mr, uint64_t va, uint64_t len);

// The bytes [off, off + len) of a segment list (len may run past its end: then to the end).
SegmentList slice(const SegmentList& list, uint64_t off, uint64_t len);

// Where the bytes [off, off + len) of a segment list are, if they lie in one directly
// addressable segment; else nullptr.
uint8_t* contiguous_at(const SegmentList& list, uint64_t off, uint64_t len);

// copy_segments' failures: the source could not be read (kSourceFault), or the target could not
// be written or the lists ran short (EFAULT). A process_vm_* call fails when the owning
// process unmapped the memory (an on-demand MR names any address) or died.
constexpr int kSourceFault = EIO;

// kStreaming: the copy is a part of a long message (kStreamingMessageBytes or more), which
// outgrows the caches: memory the router maps is written with stream_copy, past them.
enum class CopyHint { kCached, kStreaming };

// Copies the first `len` bytes described by src into dst. Returns 0, kSourceFault or EFAULT.
int copy_segments(const SegmentList& src, const SegmentList& dst, uint64_t len,
                  CopyHint hint = CopyHint::kCached);
// The same between arrays of segments, from `soff` bytes into src to `doff` bytes into dst
// (no SegmentList, of 3 KiB, is made or sliced for a part of a message).
int copy_spans(const Segment* src, uint32_t nsrc, uint64_t soff, const Segment* dst, uint32_t ndst,
               uint64_t doff, uint64_t len, CopyHint hint = CopyHint::kCached);

// Direct pointer to 8 bytes at va when they lie in the mapped part, else nullptr.
uint64_t* mapped_u64(const Mr& mr, uint64_t va);

// Fetch-and-add or compare-and-swap on the 8 aligned bytes at va (bounds already checked);
// the value before goes to *orig. Mapped memory gets a real atomic; an unmapped target a
// read-modify-write through its owner's address space, atomic with respect to other RDMA
// atomics because all run on the router thread (IBV_ATOMIC_HCA). Before it writes, the value
// it read is noted in *intent as request `request`'s (common/atomic_intent.h); an intent a
// previous process noted for the same request, whose change the target shows made, is
// answered from the note without changing anything. Returns 0 or EFAULT.
int atomic_on_mr(const Mr& mr, uint64_t va, const AtomicChange& change, AtomicIntent* intent,
                 uint32_t request, uint64_t* orig);

// Stores `value` into the 8 aligned bytes at va (bounds already checked) at once: a real
// atomic store in mapped memory, else a write through the owner's address space (atomic
// with respect to other RDMA atomics, which all run on the router thread). 0 or EFAULT.
int atomic_store_on_mr(const Mr& mr, uint64_t va, uint64_t value);

}  // namespace wharf::router
