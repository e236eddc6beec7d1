// A TCP listener: see listener.h.
#include "links/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

namespace wharf::links {

int listen_tcp(uint32_t address, uint16_t port, int epoll_fd, UniqueFd* out) {
  out->reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!out->valid()) return errno;
  int one = 1;
  setsockopt(out->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(address);
  a.sin_port = htons(port);
  if (bind(out->get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(out->get(), 64) != 0)
    return errno;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, out->get(), &ev) != 0) return errno;
  return 0;
}

}  // namespace wharf::links
