// What wharf-device-plugin answers the kubelet, as pure functions of its configuration: the
// device IDs it advertises, which IDs are its own, what every container it is allocated to
// gets (environment, mounts, device nodes) and its preferred allocation. No I/O: the gRPC
// service (plugin_service.h) translates the results into the API's messages.
//
// The router is shared by all the host's pods, so the devices are not distinct hardware: a
// device ID only counts a pod against the node's capacity, and every container gets the same.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::device_plugin {

// Inside a container that got a device.
constexpr std::string_view kContainerRouterDir = "/run/wharf";
constexpr std::string_view kContainerLibDir = "/opt/wharf/lib";
constexpr std::string_view kContainerDevDir = "/dev/infiniband";
constexpr std::string_view kContainerClassDir = "/sys/class";

// The device nodes' file names, on the host (host_state.h) as in the container.
constexpr std::string_view kUverbsNode = "uverbs0";
constexpr std::string_view kRdmaCmNode = "rdma_cm";

// What the host holds for containers; paths absolute.
struct HostLayout {
  std::string router_socket;  // the router's socket, whose directory the container shares
  std::string lib_dir;        // holds our libibverbs.so.1, and librdmacm.so.1 if has_rdmacm
  bool has_rdmacm = false;
  std::string dev_dir;                  // holds the device nodes kUverbsNode and kRdmaCmNode
  std::string class_dir;                // the sysfs view for containers, as their /sys/class
  std::vector<std::string> class_dirs;  // its top-level directories, e.g. "infiniband"
};

struct Mount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
};

struct DeviceNode {
  std::string container_path;
  std::string host_path;
  std::string permissions;  // of "r", "w", "m"
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::map<std::string, std::string> annotations;
  std::vector<Mount> mounts;
  std::vector<DeviceNode> devices;
};

// What a container gets, whichever devices it was given:
//   WHARF_ROUTER = kContainerRouterDir/<the socket's file name>, the router's directory bound
//   there read-only (connecting to a socket needs no writable mount; a pod must not be able to
//   replace the socket with its own);
//   LD_PRELOAD = libibverbs.so.1, then librdmacm.so.1 when the host has it (the order and the
//   rule of container::container_environment), from lib_dir bound read-only on kContainerLibDir;
//   each of class_dirs bound read-only on kContainerClassDir/<name>;
//   the device nodes as kContainerDevDir/<name>, "rw";
//   the annotation io.wharf.device-view=true, for which a runtime that runs OCI hooks (podman,
//   CRI-O) runs wharf-oci-hook, which mounts the container's own sysfs view.
ContainerAllocation container_allocation(const HostLayout& host);

// "wharf-0" ... "wharf-<count - 1>".
std::vector<std::string> device_ids(int count);

// Empty when every ID is one of device_ids(count); else why the first that is not is refused.
std::string check_device_ids(const std::vector<std::string>& ids, int count);

// The first `size` of must_include, then of available, each ID once.
std::vector<std::string> preferred_allocation(const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size);

}  // namespace wharf::device_plugin
