#include "fake_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "proto/cm_messages.h"

namespace wharf::verify {

namespace host = proto::host;

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

bool write_all(int fd, const uint8_t* p, size_t len) {
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

FakePeer::FakePeer(int own_port, int router_port) : router_port_(router_port) {
  listener_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in a = loopback(own_port);
  if (bind(listener_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listener_.get(), 4) != 0)
    listener_.reset();
}

bool FakePeer::read_exact(int fd, uint8_t* out, size_t len, int timeout_ms) {
  while (len > 0) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return false;
    const ssize_t n = ::recv(fd, out, len, 0);
    if (n <= 0) return false;
    out += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool FakePeer::hello(int fd) {
  host::Hello mine;
  mine.incarnation = 7;
  std::memcpy(mine.host.data(), "b", 1);
  uint8_t out[host::kHelloSize];
  uint8_t in[host::kHelloSize];
  host::Hello theirs;
  return proto::encode(mine, out, sizeof(out)) == sizeof(out) && write_all(fd, out, sizeof(out)) &&
         read_exact(fd, in, sizeof(in), 5000) && proto::decode(in, sizeof(in), &theirs) &&
         host::negotiate(mine, theirs) != 0;
}

bool FakePeer::connect() {
  if (!listener_.valid()) return false;
  // The router may have tried us before we listened and now waits out a backoff; our Hello
  // ends it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    out_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const sockaddr_in a = loopback(router_port_);
    if (::connect(out_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) break;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int one = 1;
  setsockopt(out_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (!hello(out_.get())) return false;
  host::Packet nobody;  // a datagram to a QP that does not exist: dropped
  nobody.hdr.opcode = host::opcode_of(host::kUd, host::kSendOnly);
  nobody.hdr.dest_qpn = 0xabcdef;
  nobody.hdr.src_qpn = 0x123;
  if (!send(nobody)) return false;
  pollfd p{listener_.get(), POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return false;
  in_.reset(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!in_.valid() || !hello(in_.get())) return false;
  // Its networks come first, announced as CM datagrams.
  host::Packet ann;
  bool announcement = false;
  while (network_ == 0)
    if (!read_packet(&ann, 5000, &announcement)) return false;
  return true;
}

bool FakePeer::send(host::Packet p) {
  if (!host::finish_packet(&p)) return false;
  uint8_t head[host::kPacketHeaderSize + host::kMaxExtensionsSize];
  const size_t n = host::encode_headers(p, head, sizeof(head));
  return n != 0 && write_all(out_.get(), head, n) &&
         (p.payload_len == 0 || write_all(out_.get(), p.payload, p.payload_len));
}

bool FakePeer::read_packet(host::Packet* p, int timeout_ms, bool* announcement) {
  buf_.resize(host::kPacketHeaderSize);
  if (!read_exact(in_.get(), buf_.data(), buf_.size(), timeout_ms)) return false;
  const size_t size = host::packet_size(buf_.data(), buf_.size());
  if (size < host::kPacketHeaderSize || size > host::kMaxPacketSize) return false;
  buf_.resize(size);
  if (!read_exact(in_.get(), buf_.data() + host::kPacketHeaderSize, size - host::kPacketHeaderSize,
                  timeout_ms))
    return false;
  size_t used = 0;
  if (host::decode_packet(buf_.data(), buf_.size(), p, &used) != host::DecodeStatus::kOk)
    return false;
  proto::CmMad m;
  *announcement = p->hdr.dest_qpn == proto::kCmQpn &&
                  proto::decode(p->payload, p->payload_len, &m) && m.type == proto::kCmNetAnnounce;
  if (*announcement && network_ == 0) network_ = static_cast<uint32_t>(m.status);
  return true;
}

bool FakePeer::receive(host::Packet* p, int timeout_ms) {
  bool announcement = true;
  while (announcement)
    if (!read_packet(p, timeout_ms, &announcement)) return false;
  return true;
}

}  // namespace wharf::verify
