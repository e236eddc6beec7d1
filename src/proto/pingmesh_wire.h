// Pingmesh probes between routers (issue #20; docs/wire-protocol.md, "Pingmesh probes").
//
// A probe is one UD SEND-only packet on the host links to the reserved QPN kPingmeshQpn with
// Q_Key kPingmeshQkey, as the connection manager's MADs go to QPN 1: it travels the links, the
// packet format and the router loops that applications' packets do. Its payload is one Probe
// (explicit little-endian, proto/codec.h). The probed router answers at once with the same
// Probe, kind kReply, stamped with its own clock when the probe arrived and when it answered,
// so the prober can take the answerer's delay out of the round trip. The two clocks are never
// compared: each side subtracts only its own times.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/codec.h"

namespace wharf::proto::pingmesh {

constexpr uint32_t kPingmeshQpn = 0xfffffd;
constexpr uint32_t kPingmeshQkey = 0x57504d51;  // "QMPW" as little-endian bytes

enum Kind : uint8_t { kProbe = 1, kReply = 2 };

struct Probe {
  uint8_t kind = kProbe;
  uint8_t traffic_class = 0;  // the link class it was sent on (all probes use class 0 today)
  uint16_t reserved = 0;      // 0
  uint32_t seq = 0;           // the prober's number for it, echoed
  uint64_t sent_ns = 0;       // the prober's monotonic clock when it sent it, echoed
  uint64_t received_ns = 0;   // kReply: the answerer's monotonic clock when it arrived
  uint64_t replied_ns = 0;    // kReply: the answerer's monotonic clock when it answered
  // 0: a probe between routers. Else a probe within a tenant's virtual network: the prober's
  // number for that network, echoed (the packet's PacketHeader.network carries the
  // answerer's number for it, as a request's does; an answerer without it drops the probe).
  uint32_t network = 0;
  template <class V>
  void visit(V&& v) {
    v(kind), v(traffic_class), v(reserved), v(seq), v(sent_ns), v(received_ns), v(replied_ns),
        v(network);
  }
};
constexpr size_t kProbeSize = 36;

// The probe in bytes[0, len), if they are one: exactly kProbeSize bytes, a known kind, the
// reserved field 0.
inline bool decode_probe(const uint8_t* bytes, size_t len, Probe* p) {
  return decode(bytes, len, p) && (p->kind == kProbe || p->kind == kReply) && p->reserved == 0;
}

// The answer to `probe`, which arrived at received_ns and is answered at replied_ns.
inline Probe answer(const Probe& probe, uint64_t received_ns, uint64_t replied_ns) {
  Probe r = probe;
  r.kind = kReply;
  r.received_ns = received_ns;
  r.replied_ns = replied_ns;
  return r;
}

}  // namespace wharf::proto::pingmesh
