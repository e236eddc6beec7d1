// Verbs Wharf does not implement yet, answering as rdma-core does for a provider without
// them (listed in the README's support table). Also the fork-safety entries: Wharf needs no
// MADV_DONTFORK because registration keeps fork semantics itself (abi/verbs/fork.h).
#include <errno.h>
#include <infiniband/verbs.h>

#include "abi/verbs/export.h"

WHARF_EXPORT int ibv_fork_init(void) { return 0; }

WHARF_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

WHARF_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

WHARF_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

// Payloads are copied with memcpy, which does not store bytes in address order, so no
// ordering is promised (applications poll completions, or the last byte: see mr_access.cc).
WHARF_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, enum ibv_wr_opcode, uint32_t) { return 0; }

WHARF_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
