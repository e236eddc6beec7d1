#include "router_dump.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proto/codec.h"
#include "proto/datagram.h"
#include "proto/messages.h"

namespace wharfctl {

using namespace wharf;

bool dump_router_resources(const std::string& socket_path, std::string* json, std::string* error) {
  auto fail = [&](const std::string& why) {
    *error = "router " + socket_path + ": " + why;
    return false;
  };
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) return fail("socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  UniqueFd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!sock.valid() ||
      ::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
    return fail(std::string(std::strerror(errno)) + " (is wharfd running? see -r)");
  proto::Header hdr;
  hdr.op = static_cast<uint16_t>(proto::Op::kDumpResources);
  hdr.seq = 1;
  uint8_t buf[proto::kMaxMessage];
  const size_t n = proto::encode(hdr, buf, sizeof(buf));
  if (int err = proto::send_datagram(sock.get(), buf, n, nullptr, 0, 0); err != 0)
    return fail(std::strerror(err));
  pollfd pfd{sock.get(), POLLIN, 0};
  if (::poll(&pfd, 1, 10000) != 1) return fail("no answer");
  UniqueFd fds[proto::kMaxFds];
  int nfds = 0;
  const ssize_t got =
      proto::recv_datagram(sock.get(), buf, sizeof(buf), fds, proto::kMaxFds, &nfds, 0);
  proto::Header rep;
  proto::DumpResourcesRep body;
  if (got < static_cast<ssize_t>(proto::kHeaderSize) ||
      !proto::decode(buf, proto::kHeaderSize, &rep) || rep.seq != hdr.seq ||
      rep.op != (hdr.op | proto::kReplyBit))
    return fail("malformed answer");
  if (rep.status != 0) return fail(std::strerror(static_cast<int>(rep.status)));
  if (!proto::decode(buf + proto::kHeaderSize, static_cast<size_t>(got) - proto::kHeaderSize,
                     &body) ||
      nfds != 1 || body.bytes > (64u << 20))
    return fail("malformed answer");
  json->resize(body.bytes);
  for (size_t done = 0; done < json->size();) {
    const ssize_t r =
        ::pread(fds[0].get(), json->data() + done, json->size() - done, static_cast<off_t>(done));
    if (r <= 0) return fail("short answer");
    done += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace wharfctl
