// The container's device view (the sysfs files) and wharf-exec's record.
#include <errno.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "container/record.h"
#include "container/sysfs_tree.h"
#include "proto/device.h"

namespace wharf::container {
namespace {

std::map<std::string, SysfsEntry> by_path(const std::vector<SysfsEntry>& tree) {
  std::map<std::string, SysfsEntry> m;
  for (const auto& e : tree) m[e.path] = e;
  return m;
}

DeviceFacts facts(uint8_t link_layer) {
  DeviceFacts f;
  f.node_guid = 0x0200123456789abcull;
  f.lid = 0xbffe;
  f.link_layer = link_layer;
  f.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 11};
  f.netdev = "eth0";
  return f;
}

TEST(SysfsTreeTest, FormatsAsTheKernelPrints) {
  EXPECT_EQ(format_guid(0x0200123456789abcull), "0200:1234:5678:9abc");
  EXPECT_EQ(format_gid(facts(1).gid), "0000:0000:0000:0000:0000:ffff:c612:000b");
  EXPECT_EQ(format_rate(2, 32), "100 Gb/sec (4X EDR)");
  EXPECT_EQ(format_rate(1, 1), "2.5 Gb/sec (1X)");
  EXPECT_EQ(format_rate(2, 16), "56 Gb/sec (4X FDR)");
  EXPECT_EQ(format_rate(16, 64), "100 Gb/sec (2X HDR)");
}

TEST(SysfsTreeTest, InfiniBandPortAgreesWithQueryPort) {
  auto t = by_path(infiniband_class_tree(facts(1)));
  EXPECT_EQ(t["infiniband/wharf0/node_guid"].content, "0200:1234:5678:9abc\n");
  EXPECT_EQ(t["infiniband/wharf0/node_type"].content, "1: CA\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/state"].content, "4: ACTIVE\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/phys_state"].content, "5: LinkUp\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/lid"].content, "0xbffe\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/sm_lid"].content, "0x1\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/link_layer"].content, "InfiniBand\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/cap_mask"].content, "0x00010000\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/gids/0"].content,
            "0000:0000:0000:0000:0000:ffff:c612:000b\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/gid_attrs/types/0"].content, "IB/RoCE v1\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/gid_attrs/ndevs/0"].content, "eth0\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/pkeys/0"].content, "0xffff\n");
  EXPECT_EQ(t["infiniband/wharf0/device/net/eth0"].kind, SysfsEntry::Kind::kSymlink);
  EXPECT_EQ(t["infiniband/wharf0/device/net/eth0"].content, "/sys/class/net/eth0");
  EXPECT_EQ(t["infiniband_verbs/uverbs0/ibdev"].content, "wharf0\n");
  EXPECT_EQ(t["infiniband_verbs/uverbs0/dev"].content, "231:192\n");
}

TEST(SysfsTreeTest, EthernetHasNoLidsAndRoceV2Gids) {
  auto t = by_path(infiniband_class_tree(facts(2)));
  EXPECT_EQ(t["infiniband/wharf0/ports/1/lid"].content, "0x0\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/sm_lid"].content, "0x0\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/link_layer"].content, "Ethernet\n");
  EXPECT_EQ(t["infiniband/wharf0/ports/1/gid_attrs/types/0"].content, "RoCE v2\n");
}

// Entries past those in use are empty, as on an RNIC: the zero GID, and no type or netdev
// (the kernel fails those reads).
TEST(SysfsTreeTest, EmptyGidEntriesReadAsTheZeroGid) {
  auto t = by_path(infiniband_class_tree(facts(2)));
  for (uint32_t i = device::kGidsInUse; i < device::kGidTableLen; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(t["infiniband/wharf0/ports/1/gids/" + n].content,
              "0000:0000:0000:0000:0000:0000:0000:0000\n");
    EXPECT_EQ(t.count("infiniband/wharf0/ports/1/gid_attrs/types/" + n), 0u);
    EXPECT_EQ(t.count("infiniband/wharf0/ports/1/gid_attrs/ndevs/" + n), 0u);
  }
  EXPECT_EQ(t.count("infiniband/wharf0/ports/1/gids/" + std::to_string(device::kGidTableLen)), 0u);
}

TEST(SysfsTreeTest, ParentsComeBeforeChildren) {
  std::vector<SysfsEntry> tree = infiniband_class_tree(facts(1));
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tree.size(); ++i) index[tree[i].path] = i;
  for (size_t i = 0; i < tree.size(); ++i) {
    const std::string& p = tree[i].path;
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) continue;
    auto parent = index.find(p.substr(0, slash));
    ASSERT_NE(parent, index.end()) << p;
    EXPECT_LT(parent->second, i) << p;
    EXPECT_EQ(tree[parent->second].kind, SysfsEntry::Kind::kDir) << p;
  }
}

TEST(RecordTest, ParsesWhatItWrites) {
  Record r;
  ASSERT_EQ(parse_record("pid=42\nrouter=/run/w.sock\nlib_dir=/opt/lib\ndropin=1\n", &r), 0);
  EXPECT_EQ(r.pid, 42);
  EXPECT_EQ(r.router, "/run/w.sock");
  EXPECT_EQ(r.lib_dir, "/opt/lib");
  EXPECT_TRUE(r.dropin);
}

TEST(RecordTest, RefusesMalformedRecords) {
  Record r;
  EXPECT_EQ(parse_record("", &r), EINVAL);
  EXPECT_EQ(parse_record("pid=42\nrouter=/r\n", &r), EINVAL);               // no lib_dir
  EXPECT_EQ(parse_record("pid=-1\nrouter=/r\nlib_dir=/l\n", &r), EINVAL);   // pid
  EXPECT_EQ(parse_record("pid=12x\nrouter=/r\nlib_dir=/l\n", &r), EINVAL);  // pid
  EXPECT_EQ(parse_record("pid=99999999999\nrouter=/r\nlib_dir=/l\n", &r), EINVAL);
  EXPECT_EQ(parse_record("pid=1\nrouter /r\nlib_dir=/l\n", &r), EINVAL);  // no '='
}

TEST(RecordTest, EnvironmentInjectsTheLibraries) {
  Record r{1, "/run/w.sock", "/nonexistent-lib", false};
  auto env = container_environment({"LD_PRELOAD=/x.so", "PATH=/bin"}, "c1", r);
  std::map<std::string, std::string> m;
  for (const auto& e : env) m[e.substr(0, e.find('='))] = e.substr(e.find('=') + 1);
  // librdmacm only when the directory has it.
  EXPECT_EQ(m["LD_PRELOAD"], "/nonexistent-lib/libibverbs.so.1:/x.so");
  EXPECT_EQ(m["WHARF_ROUTER"], "/run/w.sock");
  EXPECT_EQ(m["WHARF_CONTAINER"], "c1");
  r.dropin = true;
  env = container_environment({"PATH=/bin"}, "c1", r);
  EXPECT_NE(std::find(env.begin(), env.end(), "LD_LIBRARY_PATH=/nonexistent-lib"), env.end());
}

}  // namespace
}  // namespace wharf::container
