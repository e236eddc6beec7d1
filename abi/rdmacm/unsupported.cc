// What our librdmacm does not implement: multicast, ECE and rsockets. Each entry fails the way
// its caller checks for: int-returning rdma_* calls -1 with errno EOPNOTSUPP, rsockets calls -1
// with errno EOPNOTSUPP (as a socket call that is not supported).
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <cerrno>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/id.h"

using wharf::rdmacm::fail;

namespace {

int unsupported() { return fail(EOPNOTSUPP); }

}  // namespace

// ---- Multicast ----
WHARF_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return unsupported(); }
WHARF_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return unsupported();
}
WHARF_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return unsupported(); }

// ---- ECE ----
WHARF_EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return unsupported(); }
WHARF_EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return unsupported(); }
WHARF_EXPORT int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) { return unsupported(); }

// ---- rsockets ----
WHARF_EXPORT int rsocket(int, int, int) { return unsupported(); }
WHARF_EXPORT int rbind(int, const sockaddr*, socklen_t) { return unsupported(); }
WHARF_EXPORT int rlisten(int, int) { return unsupported(); }
WHARF_EXPORT int raccept(int, sockaddr*, socklen_t*) { return unsupported(); }
WHARF_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return unsupported(); }
WHARF_EXPORT int rshutdown(int, int) { return unsupported(); }
WHARF_EXPORT int rclose(int) { return unsupported(); }
WHARF_EXPORT ssize_t rrecv(int, void*, size_t, int) { return unsupported(); }
WHARF_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return unsupported();
}
WHARF_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return unsupported(); }
WHARF_EXPORT ssize_t rsend(int, const void*, size_t, int) { return unsupported(); }
WHARF_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return unsupported();
}
WHARF_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return unsupported(); }
WHARF_EXPORT ssize_t rread(int, void*, size_t) { return unsupported(); }
WHARF_EXPORT ssize_t rreadv(int, const iovec*, int) { return unsupported(); }
WHARF_EXPORT ssize_t rwrite(int, const void*, size_t) { return unsupported(); }
WHARF_EXPORT ssize_t rwritev(int, const iovec*, int) { return unsupported(); }
WHARF_EXPORT int rpoll(pollfd*, nfds_t, int) { return unsupported(); }
WHARF_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return unsupported(); }
WHARF_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return unsupported(); }
WHARF_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return unsupported(); }
WHARF_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return unsupported(); }
WHARF_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return unsupported(); }
WHARF_EXPORT int rfcntl(int, int, ...) { return unsupported(); }
WHARF_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return unsupported(); }
WHARF_EXPORT int riounmap(int, void*, size_t) { return unsupported(); }
// rsocket.h declares a size_t result; -1 converts to SIZE_MAX, which callers compare with -1.
WHARF_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  return static_cast<size_t>(unsupported());
}
