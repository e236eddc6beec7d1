// Datagram I/O with attached file descriptors (SCM_RIGHTS) over SOCK_SEQPACKET/DGRAM sockets.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "common/unique_fd.h"

namespace wharf::proto {

// Sends one datagram carrying nfds descriptors. Returns 0 or an errno.
int send_datagram(int sock, const uint8_t* buf, size_t len, const int* fds, int nfds, int flags);

// Receives one datagram into buf. Descriptors that arrive are owned by fds[0..*nfds).
// Returns the byte count, or -errno: -EMSGSIZE when the datagram or its descriptors were
// truncated (any descriptors received are closed), 0 on orderly shutdown.
ssize_t recv_datagram(int sock, uint8_t* buf, size_t cap, UniqueFd* fds, int max_fds, int* nfds,
                      int flags);

// Sends one CqEventMsg naming `cq` on a completion channel socket without blocking (a full
// channel already holds an event that wakes its reader). Returns 0 or an errno.
int send_cq_event(int sock, uint32_t cq);

}  // namespace wharf::proto
