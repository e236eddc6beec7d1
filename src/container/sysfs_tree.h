// The files a container's /sys/class shows for the device wharf0: the entries rdma-core's
// sysfs layout has under /sys/class/infiniband and /sys/class/infiniband_verbs, with values
// that agree with what our libibverbs answers to ibv_query_device/port/gid. Pure: building
// the list does no I/O (device_view.h writes it).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace wharf::container {

// What the router and the container's registration say about the device.
struct DeviceFacts {
  uint64_t node_guid = 0;  // host order
  uint16_t lid = 0;
  uint8_t link_layer = 1;  // IBV_LINK_LAYER_INFINIBAND (1) or _ETHERNET (2)
  std::array<uint8_t, 16> gid{};
  std::string netdev;  // the container's interface, the GID's netdev
};

struct SysfsEntry {
  enum class Kind { kDir, kFile, kSymlink };
  Kind kind = Kind::kFile;
  std::string path;     // relative to /sys/class, e.g. "infiniband/wharf0/node_guid"
  std::string content;  // file contents (with the trailing newline sysfs prints), link target
};

// Parents come before children.
std::vector<SysfsEntry> infiniband_class_tree(const DeviceFacts& facts);

// Formats as the kernel prints them (drivers/infiniband/core/sysfs.c).
std::string format_guid(uint64_t guid);                      // "0011:2233:4455:6677"
std::string format_gid(const std::array<uint8_t, 16>& gid);  // eight groups of four hex digits
// "100 Gb/sec (4X EDR)" for an IBTA width code (1, 2, 4, 8, 16) and speed code (1 ... 128).
std::string format_rate(uint8_t width, uint8_t speed);

}  // namespace wharf::container
