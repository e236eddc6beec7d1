// wharf-cni's input: the CNI_* environment and the network configuration on stdin (CNI spec
// 1.0, "Parameters" and "Section 1"), read and checked before anything is registered. Every
// byte comes from the runtime and is treated as untrusted text.
//
// Configuration keys of wharf-cni (all optional):
//   "router"    the router's control socket (default $WHARF_ROUTER, else /run/wharf/wharfd.sock)
//   "tenant"    the pod's tenant (default: K8S_POD_NAMESPACE from CNI_ARGS)
//   "network"   the tenant's virtual network (default: the configuration's "name")
//   "subnet"    the network's CIDR; the pod's IP must lie in it
//   "orchestrator", "tlsCA", "tokenFile"
//               wharf-orchestrator's http(s)://HOST:PORT, the CA its certificate chains to,
//               and a file holding a token to present (control/credentials.h): the pod is
//               placed there (its record, address and LID) before the router holds it
// The pod's virtual IP is its IPv4 address in prevResult; its container name comes from
// K8S_POD_NAME (pod_name below).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cni_error.h"

namespace wharf::cni {

// The CNI versions whose configurations and results wharf-cni reads and writes: those whose
// result carries "ips" and "interfaces" (0.3.0 on).
extern const std::vector<std::string> kSupportedVersions;

enum class Command { kAdd, kDel, kCheck, kVersion };

struct Invocation {
  Command command = Command::kVersion;
  std::string sandbox;                      // CNI_CONTAINERID
  std::string netns;                        // CNI_NETNS; may be empty on DEL
  std::string ifname;                       // CNI_IFNAME
  std::map<std::string, std::string> args;  // CNI_ARGS
};

// Reads the environment through `getenv`. Fails with kInvalidEnvironment naming what is
// missing or malformed.
using GetEnv = const char* (*)(const char*);
std::optional<Invocation> read_invocation(GetEnv getenv, Error* err);

// CNI_ARGS, "K=V;K=V". A part without '=' is an error.
std::optional<std::map<std::string, std::string>> parse_cni_args(const std::string& text);

struct NetConf {
  std::string cni_version;
  std::string name;  // the CNI network's
  std::string router;
  std::string tenant;
  std::string network;
  std::optional<std::pair<uint32_t, int>> subnet;  // base (host order), prefix length
  std::string orchestrator;                        // "": none
  std::string tls_ca;
  std::string token_file;
  // prevResult as given (re-emitted on ADD), and the pod's IPv4 address in it (host order;
  // 0 when there is no prevResult).
  std::string prev_result;
  uint32_t pod_ip = 0;
};

// The configuration for `inv`: decode, version, keys, and (ADD and CHECK) prevResult with an
// IPv4 address for the pod. `default_router` is used when the config names none. On
// failure fills *err with the spec's code and a message naming the key at fault.
std::optional<NetConf> read_netconf(const std::string& stdin_text, const Invocation& inv,
                                    const std::string& default_router, Error* err);

// The version to answer a VERSION command in: the one its stdin names when wharf-cni speaks
// it, else the newest it speaks. VERSION always answers (it is how callers find out).
std::string read_version_request(const std::string& stdin_text);

// The container name the pod has at the router: K8S_POD_NAME, cut to 63 bytes with a hash of
// the whole when longer (Kubernetes allows 253); else "sandbox-" and the sandbox ID's first
// 12 characters.
std::string pod_name(const Invocation& inv);

}  // namespace wharf::cni
