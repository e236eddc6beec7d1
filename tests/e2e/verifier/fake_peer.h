// A router's peer that the test plays itself: cluster host "b" speaking the host wire
// (docs/wire-protocol.md, "Host-to-host transport") to the real router of host "a", so a
// test can send requests no real requester makes (a new message inside another, a payload
// past its RETH) and read exactly what the router answers.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "common/unique_fd.h"
#include "proto/host_wire.h"

namespace wharf::verify {

class FakePeer {
 public:
  // Listens on 127.0.0.1:`own_port` (host b's port in the cluster file); the router of host
  // a listens on `router_port`.
  FakePeer(int own_port, int router_port);

  // Opens the connection to the router that our requests go on, with its Hello each way,
  // and sends it a datagram nobody takes, so the router opens its own connection to us and
  // announces its virtual networks there; accepts that one. False after a few seconds.
  bool connect();
  // The router's number for the first virtual network it announced: what our requests must
  // carry in PacketHeader.network.
  uint32_t network() const { return network_; }

  // Sends p (finished here) and its payload.
  bool send(proto::host::Packet p);
  // The next packet the router sends us other than its network announcements, or false after
  // `timeout_ms`. Its payload is valid until the next call.
  bool receive(proto::host::Packet* p, int timeout_ms = 5000);

 private:
  bool hello(int fd);
  bool read_exact(int fd, uint8_t* out, size_t len, int timeout_ms);
  // The next packet from the router; a network announcement is taken here (*announcement).
  bool read_packet(proto::host::Packet* p, int timeout_ms, bool* announcement);

  int router_port_;
  UniqueFd listener_;
  UniqueFd out_;  // ours: requests to the router
  UniqueFd in_;   // the router's: its answers
  uint32_t network_ = 0;
  std::vector<uint8_t> buf_;
};

}  // namespace wharf::verify
