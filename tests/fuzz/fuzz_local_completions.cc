// Fuzz target for router/local_completions.h: the records of completions under way that a
// router process started after a crash reads back from a QP's region (memory the QP's owner
// can write) and finishes, with the QP's rings and CQ as the owner left them.
//
// The input fills the records, then gives the rings' and the CQ's indices. Checked: the
// receive ring's consumer index moves by one at most and only from where a record says; the
// send ring's does not move; at most one entry per record reaches the CQ; no record is left
// under way; nothing is read or written outside the regions (ASan). Then an atomic under
// the region's atomic intent: its target changes at most once.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "router/host_objects.h"
#include "router/local_completions.h"
#include "router/mr_access.h"
#include "router/router.h"
#include "router/session.h"

using namespace wharf;
using namespace wharf::router;

namespace {

// A session for the CQ's owner (an overrun reports to it); its router is never started.
struct Owner {
  Owner() {
    RouterConfig cfg;
    cfg.socket_path = "/nonexistent/wharf-fuzz-local-completions.sock";
    router = std::make_unique<Router>(cfg);
    session = std::make_unique<Session>(router.get(), UniqueFd(), getpid(), 0, &container);
  }
  std::unique_ptr<Router> router;
  Container container;
  std::unique_ptr<Session> session;
  HostObjects objects;  // none: the QP has no SRQ here
};

shm::RingHeader* header(uint8_t* base, size_t off) {
  return reinterpret_cast<shm::RingHeader*>(base + off);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Owner owner;
  constexpr uint32_t kDepth = 8;
  constexpr uint32_t kQpn = 0x1234;
  Cq cq;
  cq.owner = owner.session.get();
  const shm::CqLayout cl = shm::cq_layout(8);
  ShmRegion cq_region;
  if (cq_region.create("wharf-fuzz-cq", cl.total) != 0) return 0;
  cq.use_region(std::move(cq_region), cl);
  Qp qp;
  qp.owner = owner.session.get();
  qp.qpn = kQpn;
  qp.send_cq = qp.recv_cq = &cq;
  qp.sq_entries = qp.rq_entries = kDepth;
  qp.sq_slot = shm::send_slot_size(1, 0);
  qp.rq_slot = shm::recv_slot_size(1);
  const shm::QpLayout l = qp.layout();
  if (qp.shm.create("wharf-fuzz-qp", l.total) != 0) return 0;

  uint8_t* records = qp.shm.data() + l.completions_off;
  const size_t n = std::min(size, sizeof(shm::QpLocalCompletions));
  std::memcpy(records, data, n);
  fuzz::Input in(data + n, size - n);
  // The records' QPN often right, so that their entries are posted.
  for (shm::LocalCompletion* r :
       {&qp.local_completions()->receiving, &qp.local_completions()->sending})
    if (in.u8() & 1) r->cqe.qp_num = kQpn;
  uint8_t* base = qp.shm.data();
  const uint32_t sq_consumer = in.u32(), rq_consumer = in.u32();
  header(base, l.sq_ring_off)->consumer.value.store(sq_consumer);
  header(base, l.sq_ring_off)->producer.value.store(sq_consumer + in.u8() % 12);
  header(base, l.rq_ring_off)->consumer.value.store(rq_consumer);
  header(base, l.rq_ring_off)->producer.value.store(rq_consumer + in.u8() % 12);
  const uint32_t cq_consumer = in.u32();
  header(cq.shm.data(), cl.ring_off)->consumer.value.store(cq_consumer);
  header(cq.shm.data(), cl.ring_off)->producer.value.store(cq_consumer + in.u8() % 12);
  const uint32_t cq_before = cq.ring.position();

  qp.sq().resync();
  qp.rq().resync();
  finish_local_completions_st(&qp, owner.objects);

  const uint32_t rq_after = header(base, l.rq_ring_off)->consumer.value.load();
  WHARF_FUZZ_CHECK(
      rq_after == rq_consumer || (rq_after == rq_consumer + 1 &&
                                  qp.local_completions()->receiving.ring_index == rq_consumer),
      "the receive ring moved where no record said");
  WHARF_FUZZ_CHECK(header(base, l.sq_ring_off)->consumer.value.load() == sq_consumer,
                   "the send ring moved");
  WHARF_FUZZ_CHECK(cq.ring.position() - cq_before <= 2, "more entries than records");
  for (const shm::LocalCompletion* r :
       {&qp.local_completions()->receiving, &qp.local_completions()->sending})
    WHARF_FUZZ_CHECK(r->state != shm::kLocalCompletionUnderWay, "a record left under way");

  // The atomic intent read back: the request at the send ring's head, a FETCH_ADD or a
  // compare-and-swap on a word of the owner's, changes the word at most once, and returns
  // either the word's value or the intent's (the owner's own choice).
  uint64_t word = in.u64();
  const uint64_t before = word;
  Mr mr;
  mr.addr = mr.iova = mr.mapped_start = reinterpret_cast<uint64_t>(&word);
  mr.length = mr.mapped_len = sizeof(word);
  mr.mapping = reinterpret_cast<uint8_t*>(&word);
  const AtomicChange change{(in.u8() & 1) != 0, in.u64(), in.u64()};
  const AtomicIntent noted = qp.local_completions()->atomic;
  uint64_t orig = 0;
  WHARF_FUZZ_CHECK(
      atomic_on_mr(mr, mr.iova, change, &qp.local_completions()->atomic, sq_consumer, &orig) == 0,
      "an atomic on mapped memory failed");
  WHARF_FUZZ_CHECK(orig == before || orig == noted.orig, "a result from nowhere");
  WHARF_FUZZ_CHECK(word == before || word == change.next(before), "the word changed twice");
  return 0;
}
