#include "allocation.h"

#include <algorithm>
#include <cstddef>

#include "oci_state.h"

namespace wharf::device_plugin {
namespace {

constexpr std::string_view kIdPrefix = "wharf-";
constexpr size_t kMaxIdDigits = 9;  // so that the number fits an int

std::string join(std::string_view dir, std::string_view name) {
  return std::string(dir) + "/" + std::string(name);
}

// The file name of `path`: what follows its last '/'.
std::string file_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// True when `id` is kIdPrefix and a number below count, written without leading zeros.
bool is_device_id(std::string_view id, int count) {
  if (!id.starts_with(kIdPrefix)) return false;
  const std::string_view digits = id.substr(kIdPrefix.size());
  if (digits.empty() || digits.size() > kMaxIdDigits || (digits.size() > 1 && digits[0] == '0'))
    return false;
  int n = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  return n < count;
}

}  // namespace

ContainerAllocation container_allocation(const HostLayout& host) {
  ContainerAllocation a;
  a.envs["WHARF_ROUTER"] = join(kContainerRouterDir, file_name(host.router_socket));
  std::string preload = join(kContainerLibDir, "libibverbs.so.1");
  if (host.has_rdmacm) preload += ":" + join(kContainerLibDir, "librdmacm.so.1");
  a.envs["LD_PRELOAD"] = preload;

  const std::string router_dir = host.router_socket.substr(0, host.router_socket.rfind('/'));
  a.mounts.push_back(
      {std::string(kContainerRouterDir), router_dir.empty() ? "/" : router_dir, true});
  a.mounts.push_back({std::string(kContainerLibDir), host.lib_dir, true});
  for (const std::string& dir : host.class_dirs)
    a.mounts.push_back({join(kContainerClassDir, dir), join(host.class_dir, dir), true});

  for (const std::string_view node : {kUverbsNode, kRdmaCmNode})
    a.devices.push_back({join(kContainerDevDir, node), join(host.dev_dir, node), "rw"});
  a.annotations[std::string(oci_hook::kViewAnnotation)] = "true";
  return a;
}

std::vector<std::string> device_ids(int count) {
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) ids.push_back(std::string(kIdPrefix) + std::to_string(i));
  return ids;
}

std::string check_device_ids(const std::vector<std::string>& ids, int count) {
  for (const std::string& id : ids) {
    if (!is_device_id(id, count))
      return "device ID \"" + id + "\" is not one of this plugin's (" + std::string(kIdPrefix) +
             "0 to " + std::string(kIdPrefix) + std::to_string(count - 1) + ")";
  }
  return {};
}

std::vector<std::string> preferred_allocation(const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size) {
  std::vector<std::string> chosen;
  for (const auto* ids : {&must_include, &available}) {
    for (const std::string& id : *ids) {
      if (std::ssize(chosen) >= size) return chosen;
      if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
    }
  }
  return chosen;
}

}  // namespace wharf::device_plugin
