// The extended CQ (ibv_create_cq_ex): the same CQ as ibv_create_cq, read through
// ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_* accessors. The fields
// the CQ holds are those of IBV_WC_STANDARD_FLAGS and the completion's time (every entry is
// stamped on the device's free-running clock, CLOCK_MONOTONIC_RAW in ns; the wall-clock form
// is that time moved by the clocks' current offset), and for tag-matching receives the tag and
// the sender's app_ctx. CVLAN and flow tags are not kept, so asking for them is EOPNOTSUPP.
#include <errno.h>
#include <infiniband/verbs.h>
#include <time.h>

#include <cstddef>

#include "abi/verbs/provider.h"
#include "common/clock.h"

namespace wharf::abi {
namespace {

static_assert(offsetof(ibv_cq_ex, async_events_completed) ==
                  offsetof(ibv_cq, async_events_completed),
              "ibv_cq is the prefix of ibv_cq_ex");

constexpr uint64_t kSupportedWcFlags =
    uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_TM_INFO;
constexpr uint32_t kSupportedCreateFlags =
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

Cq* of(ibv_cq_ex* ex) { return reinterpret_cast<Cq*>(ex); }

// Takes the next completion into cq->ex_wc: 0, or ENOENT when the CQ is empty.
int advance(ibv_cq_ex* ex) {
  Cq* cq = of(ex);
  if (poll_completions(&cq->cq, 1, &cq->ex_wc, &cq->ex_extra) != 1) return ENOENT;
  ex->wr_id = cq->ex_wc.wr_id;
  ex->status = cq->ex_wc.status;
  return 0;
}

int start_poll(ibv_cq_ex* ex, ibv_poll_cq_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0) return EINVAL;
  return advance(ex);
}
int next_poll(ibv_cq_ex* ex) { return advance(ex); }
void end_poll(ibv_cq_ex*) {}

enum ibv_wc_opcode read_opcode(ibv_cq_ex* ex) { return of(ex)->ex_wc.opcode; }
uint32_t read_vendor_err(ibv_cq_ex* ex) { return of(ex)->ex_wc.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* ex) { return of(ex)->ex_wc.byte_len; }
__be32 read_imm_data(ibv_cq_ex* ex) { return of(ex)->ex_wc.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* ex) { return of(ex)->ex_wc.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* ex) { return of(ex)->ex_wc.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* ex) { return of(ex)->ex_wc.wc_flags; }
uint32_t read_slid(ibv_cq_ex* ex) { return of(ex)->ex_wc.slid; }
uint8_t read_sl(ibv_cq_ex* ex) { return of(ex)->ex_wc.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* ex) { return of(ex)->ex_wc.dlid_path_bits; }
uint64_t read_completion_ts(ibv_cq_ex* ex) { return of(ex)->ex_extra.completion_ns; }
uint64_t read_completion_wallclock_ns(ibv_cq_ex* ex) {
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  const uint64_t real_ns =
      static_cast<uint64_t>(real.tv_sec) * 1000000000ull + static_cast<uint64_t>(real.tv_nsec);
  return of(ex)->ex_extra.completion_ns + (real_ns - monotonic_raw_ns());
}

// Tag and app_ctx are those of a matching completion (IBV_WC_TM_MATCH); other completions,
// including a rendezvous's data completion, have neither.
void read_tm_info(ibv_cq_ex* ex, ibv_wc_tm_info* info) {
  const Cq* cq = of(ex);
  const bool matched = (cq->ex_wc.wc_flags & IBV_WC_TM_MATCH) != 0;
  info->tag = matched ? cq->ex_extra.tm_tag : 0;
  info->priv = matched ? cq->ex_wc.imm_data : 0;
}

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  // A CQ may name a parent domain (IBV_CQ_INIT_ATTR_MASK_PD): it uses nothing of it.
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0 &&
      (attr->parent_domain == nullptr || to_pd(attr->parent_domain)->protection == nullptr ||
       attr->parent_domain->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->wc_flags & ~kSupportedWcFlags) != 0 ||
      (attr->comp_mask & ~(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) != 0 ||
      ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0 &&
       (attr->flags & ~kSupportedCreateFlags) != 0)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (attr->cqe == 0 || attr->cqe > static_cast<uint32_t>(INT32_MAX)) {
    errno = EINVAL;
    return nullptr;
  }
  Cq* cq = create_cq(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                     static_cast<int>(attr->comp_vector));
  if (cq == nullptr) return nullptr;
  ibv_cq_ex* ex = &cq->cq_ex;
  ex->comp_mask = 0;
  ex->start_poll = start_poll;
  ex->next_poll = next_poll;
  ex->end_poll = end_poll;
  ex->read_opcode = read_opcode;
  ex->read_vendor_err = read_vendor_err;
  ex->read_byte_len = read_byte_len;
  ex->read_imm_data = read_imm_data;
  ex->read_qp_num = read_qp_num;
  ex->read_src_qp = read_src_qp;
  ex->read_wc_flags = read_wc_flags;
  ex->read_slid = read_slid;
  ex->read_sl = read_sl;
  ex->read_dlid_path_bits = read_dlid_path_bits;
  ex->read_completion_ts = read_completion_ts;
  ex->read_completion_wallclock_ns = read_completion_wallclock_ns;
  ex->read_tm_info = read_tm_info;
  return ex;
}

}  // namespace wharf::abi
