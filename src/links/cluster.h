// The hosts of a cluster and the RDMA addresses each one serves (issue #3, "Routing of RDMA
// addresses"): a router asks which host's router owns a LID or a GID. The answer comes from
// a static cluster file (wharf-lab writes one); with an orchestrator (issue #4) the router
// first looks a GID up in the containers' placements (router/remote.h, host_for).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace wharf::links {

struct ClusterHost {
  std::string name;
  uint32_t address = 0;  // underlay IPv4 of its router, host order
  uint16_t port = 0;     // its router's host-to-host TCP port
  uint32_t subnet = 0;   // container subnet, host order
  uint8_t prefix = 0;
  uint16_t lid_first = 0;  // LIDs its router hands out
  uint16_t lid_last = 0;
};

class AddressDirectory {
 public:
  virtual ~AddressDirectory() = default;
  // Index (into hosts()) of the host whose router serves address vector `ah`, or -1.
  virtual int host_for(const proto::AhAttr& ah, uint8_t link_layer) const = 0;
  virtual int self() const = 0;
  virtual const std::vector<ClusterHost>& hosts() const = 0;
};

// The cluster file: one host per line, `#` starts a comment:
//   NAME ADDRESS SUBNET/PREFIX LID_FIRST-LID_LAST PORT [ROUTER-SOCKET]
// e.g. `h2 198.19.0.2 198.18.2.0/24 1025-2048 4791 /run/wharf-lab/h2/wharfd.sock`. Names,
// subnets and LID ranges must not overlap; the socket column is for tools and ignored here.
class StaticCluster final : public AddressDirectory {
 public:
  // A host's index fits the router's 16-bit fields (Qp::peer_host_cached, ParkedRemoteQp).
  static constexpr size_t kMaxHosts = 32767;

  // Parses `text`; `self_name` must be one of its hosts. Returns "" or the error.
  std::string load(const std::string& text, const std::string& self_name);

  int host_for(const proto::AhAttr& ah, uint8_t link_layer) const override;
  int self() const override { return self_; }
  const std::vector<ClusterHost>& hosts() const override { return hosts_; }

 private:
  std::vector<ClusterHost> hosts_;
  int self_ = -1;
};

}  // namespace wharf::links
