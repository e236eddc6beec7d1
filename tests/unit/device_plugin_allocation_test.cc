// wharf-device-plugin's rules (tools/wharf-device-plugin/allocation.h): what a container that
// got a device is given, which device IDs are the plugin's, and its preferred allocation.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "allocation.h"

namespace wharf::device_plugin {
namespace {

using Ids = std::vector<std::string>;

HostLayout layout() {
  HostLayout h;
  h.router_socket = "/run/wharf/wharfd.sock";
  h.lib_dir = "/usr/lib/wharf";
  h.has_rdmacm = true;
  h.dev_dir = "/run/wharf/device-plugin/dev";
  h.class_dir = "/run/wharf/device-plugin/sys/class";
  h.class_dirs = {"infiniband", "infiniband_verbs"};
  return h;
}

std::vector<std::tuple<std::string, std::string, bool>> mounts_of(const ContainerAllocation& a) {
  std::vector<std::tuple<std::string, std::string, bool>> out;
  for (const Mount& m : a.mounts) out.emplace_back(m.container_path, m.host_path, m.read_only);
  return out;
}

std::vector<std::tuple<std::string, std::string, std::string>> devices_of(
    const ContainerAllocation& a) {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const DeviceNode& d : a.devices)
    out.emplace_back(d.container_path, d.host_path, d.permissions);
  return out;
}

TEST(DevicePluginAllocationTest, AContainerGetsTheRouterTheLibrariesTheSysfsViewAndTheNodes) {
  const ContainerAllocation a = container_allocation(layout());
  EXPECT_EQ(a.envs,
            (std::map<std::string, std::string>{
                {"WHARF_ROUTER", "/run/wharf/wharfd.sock"},
                {"LD_PRELOAD", "/opt/wharf/lib/libibverbs.so.1:/opt/wharf/lib/librdmacm.so.1"}}));
  EXPECT_EQ(a.annotations, (std::map<std::string, std::string>{{"io.wharf.device-view", "true"}}));
  EXPECT_EQ(mounts_of(a),
            (std::vector<std::tuple<std::string, std::string, bool>>{
                {"/run/wharf", "/run/wharf", true},
                {"/opt/wharf/lib", "/usr/lib/wharf", true},
                {"/sys/class/infiniband", "/run/wharf/device-plugin/sys/class/infiniband", true},
                {"/sys/class/infiniband_verbs",
                 "/run/wharf/device-plugin/sys/class/infiniband_verbs", true}}));
  EXPECT_EQ(devices_of(a),
            (std::vector<std::tuple<std::string, std::string, std::string>>{
                {"/dev/infiniband/uverbs0", "/run/wharf/device-plugin/dev/uverbs0", "rw"},
                {"/dev/infiniband/rdma_cm", "/run/wharf/device-plugin/dev/rdma_cm", "rw"}}));
}

TEST(DevicePluginAllocationTest, TheRouterIsNamedInsideByItsFileNameWhereverItIsOnTheHost) {
  HostLayout h = layout();
  h.router_socket = "/var/run/hosts/a/router.sock";
  const ContainerAllocation a = container_allocation(h);
  EXPECT_EQ(a.envs.at("WHARF_ROUTER"), "/run/wharf/router.sock");
  ASSERT_FALSE(a.mounts.empty());
  EXPECT_EQ(mounts_of(a)[0], std::make_tuple("/run/wharf", "/var/run/hosts/a", true));

  h.router_socket = "/router.sock";
  EXPECT_EQ(mounts_of(container_allocation(h))[0], std::make_tuple("/run/wharf", "/", true));
}

TEST(DevicePluginAllocationTest, WithoutLibrdmacmOnlyLibibverbsIsPreloaded) {
  HostLayout h = layout();
  h.has_rdmacm = false;
  EXPECT_EQ(container_allocation(h).envs.at("LD_PRELOAD"), "/opt/wharf/lib/libibverbs.so.1");
}

TEST(DevicePluginAllocationTest, OnlyTheSysfsDirectoriesTheViewHasAreMounted) {
  HostLayout h = layout();
  h.class_dirs = {"infiniband"};
  const auto mounts = mounts_of(container_allocation(h));
  ASSERT_EQ(mounts.size(), 3u);
  EXPECT_EQ(std::get<0>(mounts[2]), "/sys/class/infiniband");
  h.class_dirs.clear();
  EXPECT_EQ(container_allocation(h).mounts.size(), 2u);
}

TEST(DevicePluginAllocationTest, DevicesAreNumberedFromZero) {
  EXPECT_EQ(device_ids(3), (Ids{"wharf-0", "wharf-1", "wharf-2"}));
  const Ids many = device_ids(64);
  ASSERT_EQ(many.size(), 64u);
  EXPECT_EQ(many.back(), "wharf-63");
}

TEST(DevicePluginAllocationTest, EveryOwnIdIsAccepted) {
  EXPECT_EQ(check_device_ids(device_ids(64), 64), "");
  EXPECT_EQ(check_device_ids({}, 64), "");
  EXPECT_EQ(check_device_ids({"wharf-10", "wharf-0"}, 11), "");
}

TEST(DevicePluginAllocationTest, AnIdNotOfThePluginIsRefusedByName) {
  struct Case {
    std::string id;
    int count;
  };
  const Case refused[] = {
      {"wharf-64", 64},         {"wharf-1", 1},    {"wharf-", 64},
      {"wharf-01", 64},         {"wharf--1", 64},  {"wharf-+1", 64},
      {"wharf-1x", 64},         {"wharf-x", 64},   {"Wharf-1", 64},
      {"wharf1", 64},           {"", 64},          {"gpu-0", 64},
      {" wharf-1", 64},         {"wharf-1 ", 64},  {"wharf-4294967296", 64},
      {"wharf-9999999999", 64}, {"wharf-0\n", 64},
  };
  for (const Case& c : refused) {
    const std::string why = check_device_ids({"wharf-0", c.id}, c.count);
    EXPECT_NE(why.find("\"" + c.id + "\""), std::string::npos) << "id '" << c.id << "': " << why;
    EXPECT_NE(why.find("wharf-" + std::to_string(c.count - 1)), std::string::npos) << why;
  }
}

TEST(DevicePluginAllocationTest, PreferredAllocationTakesMustIncludeFirst) {
  EXPECT_EQ(preferred_allocation({"wharf-3", "wharf-1", "wharf-2"}, {"wharf-2"}, 2),
            (Ids{"wharf-2", "wharf-3"}));
  EXPECT_EQ(preferred_allocation({"wharf-3", "wharf-1"}, {}, 1), (Ids{"wharf-3"}));
  EXPECT_EQ(preferred_allocation({"wharf-1", "wharf-2"}, {"wharf-2", "wharf-1"}, 2),
            (Ids{"wharf-2", "wharf-1"}));
}

TEST(DevicePluginAllocationTest, PreferredAllocationTakesEachIdOnceAndNoMoreThanAsked) {
  EXPECT_EQ(preferred_allocation({"wharf-1", "wharf-1", "wharf-2"}, {"wharf-1"}, 5),
            (Ids{"wharf-1", "wharf-2"}));
  EXPECT_EQ(preferred_allocation({"wharf-1", "wharf-2"}, {}, 0), Ids{});
  EXPECT_EQ(preferred_allocation({"wharf-1", "wharf-2"}, {}, -1), Ids{});
  EXPECT_EQ(preferred_allocation({}, {}, 3), Ids{});
}

}  // namespace
}  // namespace wharf::device_plugin
