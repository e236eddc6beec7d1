// What wharfd is told (its flags, router/router.h takes it) and what it counts.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "emulator/rnic_emulator.h"

namespace wharf::router {

struct RouterConfig {
  std::string socket_path;
  // The socket is mode 0660: its owner (the router's user) and this group may connect
  // (docs/SECURITY.md). -1: the router's own group.
  int64_t socket_gid = -1;
  // The key that lets libraries resume their sessions after this router restarts
  // (router/resume_key.h); made there if missing. Empty: sessions end with the process.
  std::string resume_key_path;
  // Where the host-to-host engine keeps its QPs' state for the next process
  // (router/kept_remote_states.h; wharfd: <socket>.state when sessions resume). Empty: in
  // anonymous memory, and a restarted router is a new incarnation to its peers.
  std::string kept_state_path;
  // Where the connection manager keeps its rdma_cm ids for the next process
  // (router/kept_cm_ids.h; wharfd: <socket>.cm when sessions resume). Empty: nothing is kept.
  std::string kept_cm_path;
  // Where the router keeps its containers' accounting for the next process
  // (router/kept_accounting.h; wharfd: <socket>.accounting when sessions resume). Empty:
  // what destroyed QPs moved ends with the process.
  std::string kept_accounting_path;
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  uint64_t spin_ns = 200000;  // keep polling this long after the last work before sleeping
  uint64_t node_guid = 0;     // 0: derived from the socket path
  // RC QPs connected on this host execute their sends in the library (router/direct_lines.h).
  bool direct_path = true;
  // RC QPs connected to QPs on other hosts move their small SENDs over express lines between
  // the two libraries (router/express.h).
  bool express = false;
  // At most this many express lines at once (each a TCP connection, and in the library a
  // descriptor and buffers): QPs beyond it go through the routers, which share a few
  // connections per host pair however many QPs there are (SRC's state bound).
  uint32_t express_lines = 256;
  // LIDs this router hands out: [lid_base, lid_base + lid_count), within the unicast range
  // 1..0xbfff. Routers of one cluster get disjoint ranges (wharf-lab: 1024 per host).
  uint16_t lid_base = 1;
  uint16_t lid_count = 0xbfff;
  // Host-to-host: the cluster file (links/cluster.h) and this host's name in it; empty:
  // this router serves only its own host.
  std::string cluster_file;
  std::string host_name;
  // With link_cert set, every link to another router is authenticated (links/link_tls.h):
  // the cluster CA, this host's certificate (naming host_name) and its key, PEM files.
  std::string link_ca;
  std::string link_cert;
  std::string link_key;
  // And every byte of those links goes in sealed records (--link-security encrypt).
  bool link_encrypt = false;
  // The watchdog: an RC QP whose peer has refused its work (RNR NAKs, rnr_retry = 7, i.e.
  // forever) this long without any progress is moved to ERR, so it stops holding the shared
  // host link (its probes) and the router's timers. 0: never.
  uint64_t watchdog_ns = 60'000'000'000;
  // How long another host's router may refuse our connections (it is restarting) before the
  // QPs that used it fail (RemotePath::on_peer_gone); one that comes back with its state
  // (kept_state_path) within it continues them.
  uint64_t peer_restart_grace_ns = 3'000'000'000;
  // rdma_cm: how long a handshake waits for the peer's next step (the REP after a REQ, the
  // RTU after a REP, a SIDR REP) or another host's router for an address, before failing
  // with -ETIMEDOUT, as the IB CM does when its retries run out (about a minute).
  uint64_t cm_timeout_ns = 60'000'000'000;
  // Pingmesh (pingmesh/mesh.h): the time between rounds of probes to every other router. 0:
  // no probes (this router still answers others').
  uint64_t pingmesh_interval_ns = 1'000'000'000;
  // Tenants' virtual networks (tenant, network) Pingmesh also probes within, each round:
  // between this router and every other that has numbered the network.
  std::vector<std::pair<std::string, std::string>> pingmesh_networks;
  // The RNIC emulator's caches and penalties (emulator/rnic_emulator.h); off by default.
  emulator::EmulationConfig emulate;
};

// What the router counts; logged on SIGUSR1 (wharfd) and read by tests.
struct RouterCounters {
  uint64_t watchdog_isolations = 0;  // QPs the watchdog moved to ERR
  uint64_t peer_qps_failed = 0;      // QPs failed because their peer router died or restarted
  uint64_t rnr_naks_received = 0;    // from other hosts
  // RC and UC packets from other hosts that no QP here takes: an unknown QPN, a QP not
  // connected to the sending host and QP or not receiving, or another virtual network's
  // (dropped silently, IBA 9.6.1).
  uint64_t stray_packets_dropped = 0;
  // Requests from other hosts dropped because their QP still had rc::Responder::kOwed answers
  // waiting for the link (the requester sends them again).
  uint64_t backlogged_requests_dropped = 0;
};

}  // namespace wharf::router
