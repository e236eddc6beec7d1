#include "container/sysfs_tree.h"

#include <cinttypes>
#include <cstdio>

#include "proto/device.h"

namespace wharf::container {
namespace {

constexpr uint8_t kLinkLayerEthernet = 2;  // IBV_LINK_LAYER_ETHERNET

// "0x%x", or zero-padded to `digits` hex digits without the 0x ("%0*x") when digits > 0.
std::string hex(unsigned v, int digits = 0, bool prefix = true) {
  char buf[32];
  if (digits > 0)
    std::snprintf(buf, sizeof(buf), "%s%0*x", prefix ? "0x" : "", digits, v);
  else
    std::snprintf(buf, sizeof(buf), "0x%x", v);
  return buf;
}

// The kernel's ib_width_enum_to_int.
int width_lanes(uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

}  // namespace

std::string format_guid(uint64_t guid) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%04x:%04x:%04x:%04x", static_cast<unsigned>(guid >> 48),
                static_cast<unsigned>((guid >> 32) & 0xffff),
                static_cast<unsigned>((guid >> 16) & 0xffff), static_cast<unsigned>(guid & 0xffff));
  return buf;
}

std::string format_gid(const std::array<uint8_t, 16>& gid) {
  std::string out;
  for (size_t i = 0; i < gid.size(); i += 2) {
    if (i != 0) out += ':';
    out += hex(static_cast<unsigned>(gid[i] << 8 | gid[i + 1]), 4, false);
  }
  return out;
}

std::string format_rate(uint8_t width, uint8_t speed) {
  int tenths = 25;  // per lane, in 100 Mb/s: SDR
  const char* name = "";
  switch (speed) {
    case 2: tenths = 50, name = " DDR"; break;
    case 4: tenths = 100, name = " QDR"; break;
    case 8: tenths = 100, name = " FDR10"; break;
    case 16: tenths = 140, name = " FDR"; break;
    case 32: tenths = 250, name = " EDR"; break;
    case 64: tenths = 500, name = " HDR"; break;
    case 128: tenths = 1000, name = " NDR"; break;
    default: break;
  }
  const int lanes = width_lanes(width);
  tenths *= lanes;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%d%s Gb/sec (%dX%s)", tenths / 10, tenths % 10 ? ".5" : "",
                lanes, name);
  return buf;
}

std::vector<SysfsEntry> infiniband_class_tree(const DeviceFacts& f) {
  using K = SysfsEntry::Kind;
  std::vector<SysfsEntry> t;
  auto dir = [&](std::string p) { t.push_back({K::kDir, std::move(p), {}}); };
  auto file = [&](std::string p, std::string v) {
    t.push_back({K::kFile, std::move(p), v + "\n"});
  };
  auto link = [&](std::string p, std::string to) {
    t.push_back({K::kSymlink, std::move(p), std::move(to)});
  };
  const bool eth = f.link_layer == kLinkLayerEthernet;
  const std::string dev = std::string("infiniband/") + device::kName;
  const std::string port = dev + "/ports/1";

  dir("infiniband");
  dir(dev);
  file(dev + "/node_type", "1: CA");
  file(dev + "/node_guid", format_guid(f.node_guid));
  file(dev + "/sys_image_guid", format_guid(f.node_guid));
  file(dev + "/fw_ver", device::kFwVer);
  file(dev + "/hw_rev", hex(device::kHwVer));
  file(dev + "/node_desc", std::string(device::kName) + " (Wharf software RNIC)");
  // No PCI function stands behind the device: `device` holds what libraries look up there,
  // the NUMA node (none) and the network interface the device's GIDs belong to.
  dir(dev + "/device");
  file(dev + "/device/numa_node", "-1");
  dir(dev + "/device/net");
  if (!f.netdev.empty()) link(dev + "/device/net/" + f.netdev, "/sys/class/net/" + f.netdev);
  dir(dev + "/ports");
  dir(port);
  file(port + "/state", "4: ACTIVE");
  file(port + "/phys_state", std::to_string(device::kPhysStateLinkUp) + ": LinkUp");
  file(port + "/rate", format_rate(device::kActiveWidth, device::kActiveSpeed));
  file(port + "/link_layer", eth ? "Ethernet" : "InfiniBand");
  file(port + "/lid", hex(eth ? 0 : f.lid));
  file(port + "/sm_lid", hex(eth ? 0 : 1));
  file(port + "/lid_mask_count", "0");
  file(port + "/sm_sl", "0");
  file(port + "/cap_mask", hex(device::kPortCapFlags, 8));
  dir(port + "/gids");
  dir(port + "/pkeys");
  dir(port + "/gid_attrs");
  dir(port + "/gid_attrs/types");
  dir(port + "/gid_attrs/ndevs");
  // An empty entry reads as the zero GID; the kernel fails reads of its type and netdev
  // (EINVAL), which here are absent files.
  for (uint32_t i = 0; i < device::kGidTableLen; ++i) {
    const std::string n = std::to_string(i);
    if (i >= device::kGidsInUse) {
      file(port + "/gids/" + n, format_gid(std::array<uint8_t, 16>{}));
      continue;
    }
    file(port + "/gids/" + n, format_gid(f.gid));
    file(port + "/gid_attrs/types/" + n, eth ? "RoCE v2" : "IB/RoCE v1");
    file(port + "/gid_attrs/ndevs/" + n, f.netdev);
  }
  for (uint32_t i = 0; i < device::kPkeyTableLen; ++i)
    file(port + "/pkeys/" + std::to_string(i), hex(device::kDefaultPkey, 4));

  // The uverbs character device libibverbs would open: major 231, minor 192 + index.
  dir("infiniband_verbs");
  file("infiniband_verbs/abi_version", "6");
  dir("infiniband_verbs/uverbs0");
  file("infiniband_verbs/uverbs0/ibdev", device::kName);
  file("infiniband_verbs/uverbs0/abi_version", "1");
  file("infiniband_verbs/uverbs0/dev", "231:192");
  link("infiniband_verbs/uverbs0/device",
       "../../infiniband/" + std::string(device::kName) + "/device");
  return t;
}

}  // namespace wharf::container
