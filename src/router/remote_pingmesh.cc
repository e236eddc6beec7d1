// RemotePath's part in Pingmesh (router/remote.h): sending the probes pingmesh::Mesh asks for
// and answering other routers' probes, as datagrams to the routers' QPN kPingmeshQpn.
#include "common/clock.h"
#include "proto/pingmesh_wire.h"
#include "router/remote.h"

namespace wharf::router {

namespace pm = proto::pingmesh;

namespace {

using Sent = pingmesh::Mesh::Sent;

}  // namespace

bool RemotePath::probe_peers_st(uint64_t now) {
  if (pingmesh_ == nullptr) return false;
  const auto send = [this](int peer, pm::Probe probe, uint32_t peer_number) {
    uint8_t body[pm::kProbeSize];
    return proto::encode(probe, body, sizeof(body)) == sizeof(body) &&
                   send_router_datagram_st(peer, pm::kPingmeshQpn, pm::kPingmeshQkey, body,
                                           sizeof(body), peer_number)
               ? Sent::kSent
               : Sent::kLost;
  };
  bool did = pingmesh_->tick(
      now, [&send](int peer, const pm::Probe& probe) { return send(peer, probe, 0); });
  for (NetworkMesh& m : network_meshes_) {
    did |= m.mesh->tick(now, [&](int peer, pm::Probe probe) {
      // Only routers that numbered the network (and told us their number) are in it.
      const auto& ids = peer_networks_[static_cast<size_t>(peer)];
      const auto theirs = ids.find(m.number);
      if (theirs == ids.end()) return Sent::kSkipped;
      probe.network = m.number;
      return send(peer, probe, theirs->second);
    });
  }
  return did;
}

void RemotePath::for_each_pingmesh_peer(bool with_networks, const PingmeshPeer& fn) const {
  if (pingmesh_ == nullptr) return;
  const auto peers = [&fn](const std::string& tenant, const std::string& network,
                           const pingmesh::Mesh& mesh, bool all) {
    for (int h = 0; h < mesh.hosts(); ++h)
      if (h != mesh.self() && (all || mesh.probed(h))) fn(tenant, network, mesh, h);
  };
  peers("", "", *pingmesh_, true);
  if (with_networks)
    for (const NetworkMesh& m : network_meshes_) peers(m.tenant, m.network, *m.mesh, false);
}

void RemotePath::on_probe_st(int host, const proto::host::Packet& p, uint64_t now) {
  pm::Probe probe;
  if (p.deth.qkey != pm::kPingmeshQkey || !pm::decode_probe(p.payload, p.payload_len, &probe))
    return;
  if (probe.kind == pm::kReply) {
    if (probe.network == 0) {
      if (pingmesh_ != nullptr) (void)pingmesh_->on_reply(host, probe, now);
      return;
    }
    for (NetworkMesh& m : network_meshes_)
      if (m.number == probe.network) (void)m.mesh->on_reply(host, probe, now);
    return;
  }
  // A probe within a network this router has not numbered has no member here: dropped, as
  // a request to that network would be.
  if (p.hdr.network != 0 && !networks_.known(p.hdr.network)) return;
  uint8_t body[pm::kProbeSize];
  // The answer is stamped as it is queued: the link writes it at the end of this pass.
  if (proto::encode(pm::answer(probe, now, now_ns()), body, sizeof(body)) == sizeof(body))
    (void)send_router_datagram_st(host, pm::kPingmeshQpn, pm::kPingmeshQkey, body, sizeof(body));
}

}  // namespace wharf::router
