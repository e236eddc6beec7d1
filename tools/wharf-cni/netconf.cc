#include "netconf.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/fnv.h"
#include "control/api_client.h"
#include "control/cidr.h"

namespace wharf::cni {
namespace {

using nlohmann::json;

constexpr size_t kMaxName = 63;        // proto::LongName without its NUL
constexpr size_t kMaxSandbox = 127;    // proto::SandboxId without its NUL
constexpr size_t kSandboxPrefix = 12;  // of a sandbox ID naming a pod without K8S_POD_NAME

// The spec's rule for container IDs, which wharf-cni applies to every name it passes on.
bool valid_name(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

Error invalid_env(std::string msg) { return {ErrorCode::kInvalidEnvironment, std::move(msg), ""}; }
Error invalid_config(std::string msg) { return {ErrorCode::kInvalidConfig, std::move(msg), ""}; }

// v's place in kSupportedVersions (oldest first); its size when v is not there.
size_t version_rank(const std::string& v) {
  return static_cast<size_t>(std::find(kSupportedVersions.begin(), kSupportedVersions.end(), v) -
                             kSupportedVersions.begin());
}

bool supported(const std::string& v) { return version_rank(v) < kSupportedVersions.size(); }

Error unsupported_version(const std::string& v) {
  std::string list;
  for (const std::string& s : kSupportedVersions) list += (list.empty() ? "" : ", ") + s;
  return {ErrorCode::kIncompatibleVersion, "wharf-cni does not speak CNI version '" + v + "'",
          "supported: " + list};
}

// A string key of the config: absent → `fallback`; present and not a string → error.
bool string_key(const json& conf, const char* key, const std::string& fallback, std::string* out,
                Error* err) {
  auto it = conf.find(key);
  if (it == conf.end() || it->is_null()) {
    *out = fallback;
    return true;
  }
  if (!it->is_string()) {
    *err = invalid_config(std::string("\"") + key + "\" must be a string");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

// The pod's IPv4 address in a result of 0.3.0 or later: among "ips", the one whose
// interface is CNI_IFNAME inside the sandbox, else one inside the sandbox, else the first.
bool pod_address(const json& result, const Invocation& inv, uint32_t* ip, Error* err) {
  const json* ips = result.contains("ips") ? &result["ips"] : nullptr;
  if (ips == nullptr || !ips->is_array()) {
    *err = invalid_config("prevResult has no \"ips\": chain wharf-cni after an IP plugin");
    return false;
  }
  const json* ifaces = result.contains("interfaces") ? &result["interfaces"] : nullptr;
  int best_rank = -1;
  for (const json& entry : *ips) {
    if (!entry.is_object() || !entry.contains("address") || !entry["address"].is_string()) continue;
    const std::string cidr = entry["address"].get<std::string>();
    uint32_t addr = 0;
    // IPv6, and 0.0.0.0, which no router takes for a container.
    if (!control::parse_ipv4(cidr.substr(0, cidr.find('/')), &addr) || addr == 0) continue;
    int rank = 0;
    if (ifaces != nullptr && ifaces->is_array() && entry.contains("interface") &&
        entry["interface"].is_number_unsigned()) {
      const size_t index = entry["interface"].get<size_t>();
      if (index < ifaces->size() && (*ifaces)[index].is_object()) {
        const json& iface = (*ifaces)[index];
        const bool in_sandbox = iface.contains("sandbox") && iface["sandbox"].is_string() &&
                                !iface["sandbox"].get<std::string>().empty();
        const bool named = iface.contains("name") && iface["name"] == inv.ifname;
        rank = in_sandbox ? (named ? 2 : 1) : 0;
      }
    }
    if (rank > best_rank) {
      best_rank = rank;
      *ip = addr;
    }
  }
  if (best_rank < 0) {
    *err = invalid_config("prevResult has no IPv4 address for the pod (wharf-cni needs one)");
    return false;
  }
  return true;
}

}  // namespace

const std::vector<std::string> kSupportedVersions = {"0.3.0", "0.3.1", "0.4.0", "1.0.0"};

std::optional<std::map<std::string, std::string>> parse_cni_args(const std::string& text) {
  std::map<std::string, std::string> args;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(';', at);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(at, end - at);
    at = end + 1;
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    args[part.substr(0, eq)] = part.substr(eq + 1);
  }
  return args;
}

std::optional<Invocation> read_invocation(GetEnv getenv, Error* err) {
  const auto env = [&](const char* name) {
    const char* v = getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  Invocation inv;
  const std::string command = env("CNI_COMMAND");
  if (command == "ADD") {
    inv.command = Command::kAdd;
  } else if (command == "DEL") {
    inv.command = Command::kDel;
  } else if (command == "CHECK") {
    inv.command = Command::kCheck;
  } else if (command == "VERSION") {
    inv.command = Command::kVersion;
    return inv;
  } else {
    *err = invalid_env("CNI_COMMAND is '" + command + "': ADD, DEL, CHECK or VERSION");
    return std::nullopt;
  }
  inv.sandbox = env("CNI_CONTAINERID");
  inv.netns = env("CNI_NETNS");
  inv.ifname = env("CNI_IFNAME");
  if (!valid_name(inv.sandbox, kMaxSandbox)) {
    *err = invalid_env("CNI_CONTAINERID '" + inv.sandbox +
                       "' is not 1-127 characters of [A-Za-z0-9._-]");
    return std::nullopt;
  }
  if (inv.ifname.empty()) {
    *err = invalid_env("CNI_IFNAME is not set");
    return std::nullopt;
  }
  if (inv.netns.empty() && inv.command != Command::kDel) {
    *err = invalid_env("CNI_NETNS is not set");
    return std::nullopt;
  }
  auto args = parse_cni_args(env("CNI_ARGS"));
  if (!args) {
    *err = invalid_env("CNI_ARGS '" + env("CNI_ARGS") + "' is not K=V;K=V");
    return std::nullopt;
  }
  inv.args = std::move(*args);
  return inv;
}

std::string pod_name(const Invocation& inv) {
  auto it = inv.args.find("K8S_POD_NAME");
  if (it == inv.args.end() || it->second.empty())
    return "sandbox-" + inv.sandbox.substr(0, kSandboxPrefix);
  const std::string& name = it->second;
  if (name.size() <= kMaxName) return name;
  // Kubernetes allows 253: the start and a hash of the whole, always the same for a name.
  char tail[10];
  std::snprintf(tail, sizeof(tail), "-%08x", fnv1a32(name));
  return name.substr(0, kMaxName - 9) + tail;
}

std::string read_version_request(const std::string& stdin_text) {
  const json conf = json::parse(stdin_text, nullptr, false);
  if (conf.is_object() && conf.contains("cniVersion") && conf["cniVersion"].is_string()) {
    const std::string version = conf["cniVersion"].get<std::string>();
    if (supported(version)) return version;
  }
  return kSupportedVersions.back();
}

std::optional<NetConf> read_netconf(const std::string& stdin_text, const Invocation& inv,
                                    const std::string& default_router, Error* err) {
  json conf = json::parse(stdin_text, nullptr, false);
  if (conf.is_discarded() || !conf.is_object()) {
    *err = {ErrorCode::kDecodeFailure, "the network configuration is not a JSON object", ""};
    return std::nullopt;
  }
  NetConf nc;
  if (!string_key(conf, "cniVersion", "", &nc.cni_version, err) ||
      !string_key(conf, "name", "", &nc.name, err) ||
      !string_key(conf, "router", default_router, &nc.router, err))
    return std::nullopt;
  if (!supported(nc.cni_version)) {
    *err = unsupported_version(nc.cni_version);
    return std::nullopt;
  }
  if (inv.command == Command::kCheck && version_rank(nc.cni_version) < version_rank("0.4.0")) {
    *err = {ErrorCode::kIncompatibleVersion, "CHECK needs CNI version 0.4.0 or later",
            "the configuration says " + nc.cni_version};
    return std::nullopt;
  }
  const auto arg = [&](const char* key) {
    auto it = inv.args.find(key);
    return it != inv.args.end() ? it->second : std::string();
  };
  if (!string_key(conf, "tenant", arg("K8S_POD_NAMESPACE"), &nc.tenant, err) ||
      !string_key(conf, "network", nc.name, &nc.network, err))
    return std::nullopt;
  if (nc.router.empty()) {
    *err = invalid_config("\"router\" is empty");
    return std::nullopt;
  }
  if (!string_key(conf, "orchestrator", "", &nc.orchestrator, err) ||
      !string_key(conf, "tlsCA", "", &nc.tls_ca, err) ||
      !string_key(conf, "tokenFile", "", &nc.token_file, err))
    return std::nullopt;
  if (!nc.orchestrator.empty()) {
    if (Status st = control::check_api_endpoint({nc.orchestrator, nc.tls_ca}); !st.is_ok()) {
      *err = invalid_config("\"orchestrator\": " + st.message());
      return std::nullopt;
    }
  }
  // DEL cleans up with whatever it is given: the router and the sandbox are enough.
  if (inv.command == Command::kDel) return nc;
  const struct {
    const char* what;
    const std::string& value;
  } names[] = {{"\"tenant\" (or K8S_POD_NAMESPACE)", nc.tenant},
               {"\"network\" (or the network's \"name\")", nc.network}};
  for (const auto& n : names) {
    if (!valid_name(n.value, kMaxName)) {
      *err = invalid_config(std::string(n.what) + " '" + n.value +
                            "' is not 1-63 characters of [A-Za-z0-9._-]");
      return std::nullopt;
    }
  }
  if (const std::string name = pod_name(inv); !valid_name(name, kMaxName)) {
    *err = invalid_env("the pod's name '" + name +
                       "' (K8S_POD_NAME, else CNI_CONTAINERID) is not 1-63 characters of "
                       "[A-Za-z0-9._-]");
    return std::nullopt;
  }
  std::string subnet;
  if (!string_key(conf, "subnet", "", &subnet, err)) return std::nullopt;
  if (!subnet.empty()) {
    control::Cidr cidr;
    if (!control::parse_cidr(subnet, &cidr)) {
      *err = invalid_config("\"subnet\" '" + subnet + "' is not A.B.C.D/N with its host bits 0");
      return std::nullopt;
    }
    nc.subnet = std::make_pair(cidr.base, cidr.prefix);
  }
  auto prev = conf.find("prevResult");
  const bool has_prev = prev != conf.end() && prev->is_object() && !prev->empty();
  if (prev != conf.end() && !prev->is_null() && !prev->is_object()) {
    *err = invalid_config("\"prevResult\" must be an object");
    return std::nullopt;
  }
  if (!has_prev) {
    *err = invalid_config(
        "no \"prevResult\": chain wharf-cni after an IP plugin (e.g. bridge "
        "with host-local)");
    return std::nullopt;
  }
  nc.prev_result = prev->dump();
  if (!pod_address(*prev, inv, &nc.pod_ip, err)) return std::nullopt;
  if (nc.subnet) {
    const control::Cidr cidr{nc.subnet->first, nc.subnet->second};
    if (!cidr.contains(nc.pod_ip)) {
      *err = invalid_config("the pod's address " + format_ipv4(nc.pod_ip) + " is outside network " +
                            nc.tenant + "/" + nc.network + "'s subnet " + subnet);
      return std::nullopt;
    }
  }
  return nc;
}

}  // namespace wharf::cni
