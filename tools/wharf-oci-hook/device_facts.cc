#include "device_facts.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <memory>

#include "common/failed_step.h"
#include "common/interface_holding.h"
#include "proto/vip_gid.h"

namespace wharf::oci_hook {
namespace {

constexpr const char* kDeviceName = "wharf0";

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};

}  // namespace

int query_device_facts(container::DeviceFacts* facts, std::string* why) {
  int n = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&n));
  if (!list) return failed_step(errno, why, "ibv_get_device_list");
  ibv_device* dev = nullptr;
  for (int i = 0; i < n && dev == nullptr; ++i)
    if (std::strcmp(ibv_get_device_name(list.get()[i]), kDeviceName) == 0) dev = list.get()[i];
  if (dev == nullptr)
    return failed_step(
        ENODEV, why, "no device wharf0 (is this Wharf's libibverbs, and does the router answer?)");
  std::unique_ptr<ibv_context, ContextDeleter> ctx(ibv_open_device(dev));
  if (!ctx) return failed_step(errno, why, "ibv_open_device wharf0");
  ibv_device_attr attr{};
  if (int err = ibv_query_device(ctx.get(), &attr); err != 0)
    return failed_step(err, why, "ibv_query_device");
  ibv_port_attr port{};
  if (int err = ibv_query_port(ctx.get(), 1, &port); err != 0)
    return failed_step(err, why, "ibv_query_port 1");
  ibv_gid gid{};
  if (int err = ibv_query_gid(ctx.get(), 1, 0, &gid); err != 0)
    return failed_step(err == -1 ? errno : err, why, "ibv_query_gid 1 0");

  facts->node_guid = be64toh(attr.node_guid);
  facts->lid = port.lid;
  facts->link_layer = port.link_layer;
  std::memcpy(facts->gid.data(), gid.raw, facts->gid.size());
  uint32_t vip = 0;
  facts->netdev = proto::vip_of_gid(facts->gid, &vip) ? interface_holding(vip) : "";
  if (facts->netdev.empty())
    return failed_step(EADDRNOTAVAIL, why,
                       "no interface of this network namespace holds GID[0]'s address");
  return 0;
}

}  // namespace wharf::oci_hook
