// A nonblocking TCP listener on a cluster host's address, watched by an epoll set: the
// routers' host links and their express lines each have one.
#pragma once

#include <cstdint>

#include "common/unique_fd.h"

namespace wharf::links {

// Listens on address:port (host order) into *out and adds it to epoll_fd for input, with
// event data 0. Returns 0 or an errno.
int listen_tcp(uint32_t address, uint16_t port, int epoll_fd, UniqueFd* out);

}  // namespace wharf::links
