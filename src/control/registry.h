// The orchestrator's model (issue #4) on a KvStore: tenants own virtual networks (CIDR
// blocks; one tenant's networks never overlap, two tenants' may), networks hold containers,
// each with a virtual IP from its network and a LID unique in the cluster. Hosts (routers)
// register on leases with the range of LIDs their router gives out and, in a cluster, their
// container subnet; a container's LID comes from its host's range, so it is the LID its
// applications see (the router takes it when the container starts: wharf-run passes it on),
// and a new container's address from its host's subnet. Routers follow every container's
// placement, so a container moved to another host keeps its address.
//
// Keys (objects hold JSON, claims plain text):
//   /wharf/tenant/<tenant>                      {}
//   /wharf/network/<tenant>/<network>           {"cidr": "198.18.1.0/24"}
//   /wharf/container/<tenant>/<container>       {"network", "vip", "host", "lid"} and the
//                                               policy's keys (control/policy_json.h)
//   /wharf/ip/<tenant>/<network>/<vip>          <container>: the address is taken
//   /wharf/lid/<lid>                            <tenant>/<container>: the LID is taken
//   /wharf/host/<host>                          {"address", "lid_first", "lid_last",
//                                               "subnet"}, on the router's lease
// Every change that must not race (creating under a parent, claiming an address or a LID,
// freeing them) is one compare-and-set transaction, so two orchestrators (or routers) on one
// store never hand out an address or a LID twice; a lost race is retried.
// Names are 1-63 characters of [a-z0-9._-], starting with a letter or digit.
// Thread safety: as the KvStore's (every method may be called from any thread).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
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
  uint16_t lid = 0;  // 0 while its host has not registered (no range to take one from)
  ContainerPolicy policy;
};

// A router's host: its address on the links between routers, the LIDs its router gives
// out, [lid_first, lid_last], and in a cluster its container subnet (the cluster file's).
struct HostInfo {
  std::string name;
  uint32_t address = 0;
  uint16_t lid_first = 0;
  uint16_t lid_last = 0;
  Cidr subnet;        // prefix 0: none (a router without a cluster serves any address)
  int64_t lease = 0;  // the store's lease the entry lives on
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
  // the lowest free LID of the host's range (none, 0, while the host is not registered).
  // When the host has a container subnet the address is picked in it (kFailedPrecondition
  // when the network has no address there); one asked for may be anywhere in the network.
  Status add_container(const std::string& tenant, const std::string& network,
                       const std::string& name, const std::string& host, uint32_t vip,
                       ContainerInfo* out);
  // The container now runs on `host`; its address stays, wherever the host's subnet is
  // (routers follow the placement). So does its LID while it is in the host's range;
  // otherwise it gets the lowest free one there (none while the host is not registered,
  // unless the host is the one it had).
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
  // How a host's record reads (false: malformed).
  static bool decode_host(const KeyValue& kv, HostInfo* out);
  // A host's fields as JSON, the form they are stored in and registered with (POST
  // /v1/hosts adds "name" and "ttl"): {"address": "A.B.C.D", "lid_first": N, "lid_last": M,
  // "subnet": "A.B.C.D/N" or null}.
  static void host_to_json(const HostInfo& h, nlohmann::json* object);
  // Reads those fields (a missing "subnet" is null); false if one is missing or malformed.
  // The values' rules (LID range, /8-/30 subnet) are add_host's and decode_host's.
  static bool host_from_json(const nlohmann::json& object, HostInfo* out);
  // The tenant and name in a container's key; false for any other key.
  static bool split_container_key(const std::string& key, std::string* tenant, std::string* name);

  // Registers `h` (again) on a new lease of ttl_seconds, returned in *lease.
  // kInvalidArgument for a bad name, LID range or subnet (/8 to /30, like a network's).
  Status add_host(const HostInfo& h, int64_t ttl_seconds, int64_t* lease);
  // The hosts whose leases are alive.
  Status list_hosts(std::vector<HostInfo>* out);

  static constexpr uint16_t kMaxLid = 0xbfff;  // unicast LIDs are 0x0001-0xbfff (IBA 4.1.3)
  // Whether s is a valid tenant, network, container or host name.
  static bool valid_name(const std::string& s);

 private:
  // Host `name`'s record in *out, or nullptr in *found while it is not registered.
  Status find_host(const std::string& name, HostInfo* out, const HostInfo** found);
  // The LID a container that has `current` (0: none) gets on host `h` (nullptr: not
  // registered), which it had before when `same_host`: `current` if it is in the host's
  // range, else the lowest free one there (a random one of the lowest few after a lost race:
  // `attempt`), else 0 if the host is not registered. Claiming it is the caller's
  // compare-and-set.
  Status lid_on_host(const HostInfo* h, uint16_t current, bool same_host, int attempt,
                     uint16_t* lid);
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
