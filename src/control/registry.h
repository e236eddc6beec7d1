// The orchestrator's model (issue #4) on a KvStore: tenants own virtual networks (CIDR
// blocks; one tenant's networks never overlap, two tenants' may), networks hold containers,
// each with a virtual IP from its network and a LID unique in the cluster.
//
// Keys (objects hold JSON, claims plain text):
//   /wharf/tenant/<tenant>                      {}
//   /wharf/network/<tenant>/<network>           {"cidr": "198.18.1.0/24"}
//   /wharf/container/<tenant>/<container>       {"network", "vip", "host", "lid"} and the
//                                               policy's keys (control/policy_json.h)
//   /wharf/ip/<tenant>/<network>/<vip>          <container>: the address is taken
//   /wharf/lid/<lid>                            <tenant>/<container>: the LID is taken
// Every change that must not race (creating under a parent, claiming an address or a LID,
// freeing them) is one compare-and-set transaction, so two orchestrators (or routers) on one
// store never hand out an address or a LID twice; a lost race is retried.
// Names are 1-63 characters of [a-z0-9._-], starting with a letter or digit.
// Thread safety: as the KvStore's (every method may be called from any thread).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/policy.h"
#include "common/status.h"
#include "control/cidr.h"
#include "control/kv_store.h"

namespace wharf::control {

struct NetworkInfo {
  std::string tenant;
  std::string name;
  Cidr cidr;
};

struct ContainerInfo {
  std::string tenant;
  std::string name;
  std::string network;
  std::string host;
  uint32_t vip = 0;
  uint16_t lid = 0;
  ContainerPolicy policy;
};

class Registry {
 public:
  explicit Registry(KvStore* store) : store_(store) {}

  Status add_tenant(const std::string& tenant);
  // kFailedPrecondition while the tenant still has networks.
  Status del_tenant(const std::string& tenant);
  Status list_tenants(std::vector<std::string>* out);

  // kAlreadyExists if the name is taken or the block overlaps another of the tenant's.
  Status add_network(const std::string& tenant, const std::string& name, const std::string& cidr);
  // kFailedPrecondition while containers use it.
  Status del_network(const std::string& tenant, const std::string& name);
  Status list_networks(const std::string& tenant, std::vector<NetworkInfo>* out);

  // Places a new container on `host` with address `vip` (0: the lowest free one; the
  // network's first address, its broadcast address and its .1 gateway are never given) and
  // a new LID.
  Status add_container(const std::string& tenant, const std::string& network,
                       const std::string& name, const std::string& host, uint32_t vip,
                       ContainerInfo* out);
  // The container now runs on `host`; its address and LID stay.
  Status move_container(const std::string& tenant, const std::string& name, const std::string& host,
                        ContainerInfo* out);
  // Frees the address and the LID with the container.
  Status del_container(const std::string& tenant, const std::string& name);
  Status get_container(const std::string& tenant, const std::string& name, ContainerInfo* out);
  // Every container of `tenant`, or of every tenant when it is empty.
  Status list_containers(const std::string& tenant, std::vector<ContainerInfo>* out);
  // Changes the container's policy with `edit` (called again if the record changed meanwhile;
  // an error from it is returned as is). *out is the container as stored afterwards.
  Status update_policy(const std::string& tenant, const std::string& name,
                       const std::function<Status(ContainerPolicy*)>& edit, ContainerInfo* out);

  // Where the containers' records live, and how a watcher reads one (false: malformed).
  static constexpr const char* kContainerPrefix = "/wharf/container/";
  static bool decode_container(const KeyValue& kv, ContainerInfo* out);
  // The tenant and name in a container's key; false for any other key.
  static bool split_container_key(const std::string& key, std::string* tenant, std::string* name);

  static constexpr uint16_t kMaxLid = 0xbfff;  // unicast LIDs are 0x0001-0xbfff (IBA 4.1.3)
  // Whether s is a valid tenant, network, container or host name.
  static bool valid_name(const std::string& s);

 private:
  Status claim_lid(const std::string& owner, uint16_t* lid);
  // The container's entry as stored (for compare-and-set) and as parsed.
  Status read_container(const std::string& tenant, const std::string& name, KeyValue* kv,
                        ContainerInfo* out);
  // Reads the container, applies `edit` and writes it back if nothing changed meanwhile
  // (else reads again).
  Status rewrite_container(const std::string& tenant, const std::string& name,
                           const std::function<Status(ContainerInfo*)>& edit, ContainerInfo* out);

  KvStore* store_;
};

}  // namespace wharf::control
