// RemotePath's part in Pingmesh (router/remote.h): sending the probes pingmesh::Mesh asks for
// and answering other routers' probes, as datagrams to the routers' QPN kPingmeshQpn.
#include "common/clock.h"
#include "proto/pingmesh_wire.h"
#include "router/remote.h"

namespace wharf::router {

namespace pm = proto::pingmesh;

bool RemotePath::probe_peers_st(uint64_t now) {
  if (pingmesh_ == nullptr) return false;
  return pingmesh_->tick(now, [this](int peer, const pm::Probe& probe) {
    uint8_t body[pm::kProbeSize];
    return proto::encode(probe, body, sizeof(body)) == sizeof(body) &&
           send_router_datagram_st(peer, pm::kPingmeshQpn, pm::kPingmeshQkey, body, sizeof(body));
  });
}

void RemotePath::on_probe_st(int host, const proto::host::Packet& p, uint64_t now) {
  pm::Probe probe;
  if (p.deth.qkey != pm::kPingmeshQkey || !pm::decode_probe(p.payload, p.payload_len, &probe))
    return;
  if (probe.kind == pm::kReply) {
    if (pingmesh_ != nullptr) (void)pingmesh_->on_reply(host, probe, now);
    return;
  }
  uint8_t body[pm::kProbeSize];
  // The answer is stamped as it is queued: the link writes it at the end of this pass.
  if (proto::encode(pm::answer(probe, now, now_ns()), body, sizeof(body)) == sizeof(body))
    (void)send_router_datagram_st(host, pm::kPingmeshQpn, pm::kPingmeshQkey, body, sizeof(body));
}

}  // namespace wharf::router
