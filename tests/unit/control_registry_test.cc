// The orchestrator's model (control/registry.h) on both store backends: tenants, networks,
// IPAM, hosts and the LIDs containers take from them, and the errors users see for bad input.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "control/registry.h"
#include "support/store_backend.h"

namespace wharf::control {
namespace {

using Code = Status::Code;

uint32_t ip(const char* text) {
  uint32_t v = 0;
  EXPECT_TRUE(parse_ipv4(text, &v)) << text;
  return v;
}

class RegistryTest : public test_support::StoreBackendTest {
 protected:
  void SetUp() override {
    test_support::StoreBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    reg_ = std::make_unique<Registry>(store_.get());
  }
  void reopen_registry() {
    reg_.reset();
    reopen();
    reg_ = std::make_unique<Registry>(store_.get());
  }
  // Registers host `name` as its router would, giving out LIDs first-last, with container
  // subnet `subnet` ("": none, a router without a cluster).
  void add_host(const char* name, uint16_t first, uint16_t last, const char* subnet = "") {
    HostInfo h{name, ip("127.0.0.1"), first, last};
    if (*subnet != '\0') {
      ASSERT_TRUE(parse_cidr(subnet, &h.subnet)) << subnet;
    }
    int64_t lease = 0;
    ASSERT_TRUE(reg_->add_host(h, 60, &lease).is_ok()) << name;
  }
  std::unique_ptr<Registry> reg_;
};

TEST_P(RegistryTest, TenantsOwnNetworksThatMayOverlapAcrossTenantsOnly) {
  ASSERT_TRUE(reg_->add_tenant("red").is_ok());
  ASSERT_TRUE(reg_->add_tenant("blue").is_ok());
  EXPECT_EQ(reg_->add_tenant("red").code(), Code::kAlreadyExists);
  EXPECT_EQ(reg_->add_tenant("Bad/Name").code(), Code::kInvalidArgument);
  ASSERT_TRUE(reg_->add_network("red", "net1", "198.18.1.0/24").is_ok());
  ASSERT_TRUE(reg_->add_network("blue", "net1", "198.18.1.0/24").is_ok());
  EXPECT_EQ(reg_->add_network("red", "net2", "198.18.0.0/16").code(), Code::kAlreadyExists);
  EXPECT_EQ(reg_->add_network("red", "net1", "198.18.9.0/24").code(), Code::kAlreadyExists);
  EXPECT_EQ(reg_->add_network("red", "net3", "198.18.1.7/24").code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_network("red", "net3", "198.18.300.0/24").code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_network("red", "net3", "198.18.2.0").code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_network("green", "net1", "198.18.1.0/24").code(), Code::kNotFound);
  ASSERT_TRUE(reg_->add_network("red", "net2", "198.18.2.0/24").is_ok());
  std::vector<NetworkInfo> nets;
  ASSERT_TRUE(reg_->list_networks("red", &nets).is_ok());
  ASSERT_EQ(nets.size(), 2u);
  EXPECT_EQ(nets[0].name, "net1");
  EXPECT_EQ(format_cidr(nets[1].cidr), "198.18.2.0/24");
  EXPECT_EQ(reg_->del_tenant("red").code(), Code::kFailedPrecondition);
  ASSERT_TRUE(reg_->del_network("red", "net1").is_ok());
  ASSERT_TRUE(reg_->del_network("red", "net2").is_ok());
  ASSERT_TRUE(reg_->del_tenant("red").is_ok());
  std::vector<std::string> tenants;
  ASSERT_TRUE(reg_->list_tenants(&tenants).is_ok());
  EXPECT_EQ(tenants, std::vector<std::string>{"blue"});
}

TEST_P(RegistryTest, ContainersGetTheLowestFreeAddressAndTheLowestFreeLidOfTheirHost) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/29").is_ok());
  add_host("h1", 1, 100);
  add_host("h2", 101, 200);
  ContainerInfo a, b, c;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "b", "h2", 0, &b).is_ok());
  EXPECT_EQ(a.vip, ip("198.18.1.2"));  // .0 is the network, .1 the gateway
  EXPECT_EQ(b.vip, ip("198.18.1.3"));
  EXPECT_EQ(a.lid, 1);
  EXPECT_EQ(b.lid, 101);
  EXPECT_EQ(reg_->add_container("t", "n", "a", "h1", 0, &c).code(), Code::kAlreadyExists);
  EXPECT_EQ(reg_->add_container("t", "n", "c", "h1", ip("198.18.1.3"), &c).code(),
            Code::kAlreadyExists);
  EXPECT_EQ(reg_->add_container("t", "n", "c", "h1", ip("198.18.1.7"), &c).code(),
            Code::kInvalidArgument);  // broadcast
  EXPECT_EQ(reg_->add_container("t", "n", "c", "h1", ip("198.18.2.5"), &c).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_container("t", "nope", "c", "h1", 0, &c).code(), Code::kNotFound);
  ASSERT_TRUE(reg_->add_container("t", "n", "c", "h1", ip("198.18.1.6"), &c).is_ok());
  ContainerInfo d, e;
  ASSERT_TRUE(reg_->add_container("t", "n", "d", "h1", 0, &d).is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "e", "h1", 0, &e).is_ok());
  EXPECT_EQ(d.vip, ip("198.18.1.4"));
  EXPECT_EQ(e.vip, ip("198.18.1.5"));
  EXPECT_EQ(e.lid, 4);  // after a, c and d
  ContainerInfo f;
  EXPECT_EQ(reg_->add_container("t", "n", "f", "h1", 0, &f).code(), Code::kExhausted);
  // A failed placement takes no LID; a deleted container gives back its address and LID.
  ASSERT_TRUE(reg_->del_container("t", "b").is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "f", "h1", 0, &f).is_ok());
  EXPECT_EQ(f.vip, ip("198.18.1.3"));
  EXPECT_EQ(f.lid, 5);
  std::vector<ContainerInfo> all;
  ASSERT_TRUE(reg_->list_containers("t", &all).is_ok());
  std::set<uint16_t> lids;
  for (const ContainerInfo& x : all) lids.insert(x.lid);
  EXPECT_EQ(all.size(), 5u);
  EXPECT_EQ(lids.size(), 5u);
  EXPECT_EQ(reg_->del_container("t", "b").code(), Code::kNotFound);
}

TEST_P(RegistryTest, TheSameAddressExistsInTwoTenants) {
  for (const char* t : {"red", "blue"}) {
    ASSERT_TRUE(reg_->add_tenant(t).is_ok());
    ASSERT_TRUE(reg_->add_network(t, "n", "198.18.1.0/24").is_ok());
  }
  add_host("h1", 1, 100);
  add_host("h2", 101, 200);
  ContainerInfo r, b;
  ASSERT_TRUE(reg_->add_container("red", "n", "c", "h1", ip("198.18.1.10"), &r).is_ok());
  ASSERT_TRUE(reg_->add_container("blue", "n", "c", "h2", ip("198.18.1.10"), &b).is_ok());
  EXPECT_NE(r.lid, b.lid);
  ContainerInfo got;
  ASSERT_TRUE(reg_->get_container("blue", "c", &got).is_ok());
  EXPECT_EQ(got.host, "h2");
}

// A container's LID is one its host's router gives out: moved to another host, it takes one
// of that host's and frees the old one; restarted on its host, it keeps it.
TEST_P(RegistryTest, AMovedContainerKeepsItsAddressAndTakesALidOfItsNewHost) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  add_host("h1", 1, 10);
  add_host("h2", 11, 20);
  ContainerInfo a, moved, again;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  ASSERT_EQ(a.lid, 1);
  ASSERT_TRUE(reg_->move_container("t", "a", "h2", &moved).is_ok());
  EXPECT_EQ(moved.vip, a.vip);
  EXPECT_EQ(moved.lid, 11);
  EXPECT_EQ(moved.host, "h2");
  ASSERT_TRUE(reg_->move_container("t", "a", "h2", &again).is_ok());
  EXPECT_EQ(again.lid, 11);
  reopen_registry();
  ContainerInfo got, b;
  ASSERT_TRUE(reg_->get_container("t", "a", &got).is_ok());
  EXPECT_EQ(got.host, "h2");
  EXPECT_EQ(got.vip, a.vip);
  EXPECT_EQ(got.lid, 11);
  ASSERT_TRUE(reg_->add_container("t", "n", "b", "h1", 0, &b).is_ok());
  EXPECT_EQ(b.lid, 1);  // freed by the move
  EXPECT_EQ(reg_->move_container("t", "zz", "h2", &moved).code(), Code::kNotFound);
}

// Containers may be placed on a host before its router registers it: they get their LID from
// the first move (wharf-run's start) after it has. Two standalone routers with the same
// range still never share a LID, and a host that comes back with another range renumbers
// its containers as they start.
TEST_P(RegistryTest, AContainerGetsALidOnceItsHostHasRegistered) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  ContainerInfo a, b, c, got;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h9", 0, &a).is_ok());
  EXPECT_EQ(a.lid, 0);
  ASSERT_TRUE(reg_->move_container("t", "a", "h9", &a).is_ok());
  EXPECT_EQ(a.lid, 0);
  add_host("h9", 30, 40);
  add_host("h8", 30, 40);
  ASSERT_TRUE(reg_->move_container("t", "a", "h9", &a).is_ok());
  EXPECT_EQ(a.lid, 30);
  ASSERT_TRUE(reg_->add_container("t", "n", "b", "h8", 0, &b).is_ok());
  EXPECT_EQ(b.lid, 31);
  ASSERT_TRUE(reg_->move_container("t", "a", "h7", &a).is_ok());  // not registered
  EXPECT_EQ(a.lid, 0);
  ASSERT_TRUE(reg_->get_container("t", "a", &got).is_ok());
  EXPECT_EQ(got.lid, 0);
  ASSERT_TRUE(reg_->add_container("t", "n", "c", "h9", 0, &c).is_ok());
  EXPECT_EQ(c.lid, 30);  // a's, freed
  add_host("h9", 50, 50);
  ASSERT_TRUE(reg_->move_container("t", "c", "h9", &c).is_ok());
  EXPECT_EQ(c.lid, 50);
  ContainerInfo d;
  EXPECT_EQ(reg_->add_container("t", "n", "d", "h9", 0, &d).code(), Code::kExhausted);
  ASSERT_TRUE(reg_->del_container("t", "a").is_ok());  // one without a LID
  ASSERT_TRUE(reg_->del_container("t", "c").is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "d", "h9", 0, &d).is_ok());
  EXPECT_EQ(d.lid, 50);
}

// In a cluster a new container's address comes from its host's part of the network (the
// cluster file's subnet, where other routers send by default); one asked for, or a moved
// container's, may be anywhere in the network (routers follow the placements).
TEST_P(RegistryTest, InAClusterANewContainersAddressIsInItsHostsSubnet) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.92.0/22").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "far", "198.18.1.0/24").is_ok());
  add_host("h1", 1, 1024, "198.18.93.0/24");
  add_host("h2", 1025, 2048, "198.18.94.0/24");
  ContainerInfo a, b, c, x;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "b", "h2", 0, &b).is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "c", "h3", 0, &c).is_ok());  // not registered
  EXPECT_EQ(a.vip, ip("198.18.93.2"));  // .93.0 and the host's gateway .93.1 are not given
  EXPECT_EQ(b.vip, ip("198.18.94.2"));
  EXPECT_EQ(c.vip, ip("198.18.92.2"));
  EXPECT_EQ(reg_->add_container("t", "far", "x", "h1", 0, &x).code(), Code::kFailedPrecondition);
  ASSERT_TRUE(reg_->add_container("t", "far", "x", "h1", ip("198.18.1.9"), &x).is_ok());
  EXPECT_EQ(x.lid, 2);
  ASSERT_TRUE(reg_->move_container("t", "a", "h2", &a).is_ok());
  EXPECT_EQ(a.vip, ip("198.18.93.2"));
  EXPECT_EQ(a.lid, 1026);
  ContainerInfo d;
  ASSERT_TRUE(reg_->add_container("t", "n", "d", "h1", 0, &d).is_ok());
  EXPECT_EQ(d.vip, ip("198.18.93.3"));  // a's address stays a's
}

TEST_P(RegistryTest, HostsRegisterWithAValidLidRange) {
  int64_t lease = 0;
  const uint32_t lo = ip("127.0.0.1");
  EXPECT_EQ(reg_->add_host({"h1", lo, 0, 10}, 60, &lease).code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_host({"h1", lo, 20, 10}, 60, &lease).code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_host({"h1", lo, 1, 0xc000}, 60, &lease).code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_host({"H/1", lo, 1, 10}, 60, &lease).code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_host({"h1", lo, 1, 10}, 0, &lease).code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_host({"h1", lo, 1, 10}, 3601, &lease).code(), Code::kInvalidArgument);
  EXPECT_EQ(reg_->add_host({"h1", lo, 1, 10, {ip("198.18.1.0"), 31}}, 60, &lease).code(),
            Code::kInvalidArgument);
  std::vector<HostInfo> hosts;
  ASSERT_TRUE(reg_->list_hosts(&hosts).is_ok());
  EXPECT_TRUE(hosts.empty());
  ASSERT_TRUE(reg_->add_host({"h1", lo, 1, 0xbfff, {ip("198.18.4.0"), 22}}, 60, &lease).is_ok());
  ASSERT_TRUE(reg_->list_hosts(&hosts).is_ok());
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].name, "h1");
  EXPECT_EQ(hosts[0].address, lo);
  EXPECT_EQ(hosts[0].lid_first, 1);
  EXPECT_EQ(hosts[0].lid_last, 0xbfff);
  EXPECT_EQ(format_cidr(hosts[0].subnet), "198.18.4.0/22");
  EXPECT_EQ(hosts[0].lease, lease);
}

// A policy that sets every kind of field, as an edit of update_policy.
ContainerPolicy some_policy() {
  ContainerPolicy p;
  p.quota[static_cast<size_t>(QuotaKind::kQp)] = 4;
  p.quota[static_cast<size_t>(QuotaKind::kMrBytes)] = uint64_t{1} << 30;
  p.rate_bps = 100'000'000;
  p.qp_rate_bps = 10'000'000;
  p.burst_bytes = 65536;
  p.priority = 5;
  return p;
}

Status set_some_policy(ContainerPolicy* p) {
  *p = some_policy();
  return Status::ok();
}

TEST_P(RegistryTest, UpdatePolicyStoresThePolicyInTheContainerRecord) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  ContainerInfo a, b, updated;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  ASSERT_TRUE(reg_->add_container("t", "n", "b", "h1", 0, &b).is_ok());
  EXPECT_TRUE(a.policy == ContainerPolicy{});  // new containers are not limited
  Status st = reg_->update_policy("t", "a", set_some_policy, &updated);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(updated.policy == some_policy());
  EXPECT_EQ(updated.vip, a.vip);  // the rest of the record stays
  EXPECT_EQ(updated.lid, a.lid);
  EXPECT_EQ(updated.host, "h1");

  // The edit sees the stored policy.
  ContainerPolicy seen;
  ASSERT_TRUE(reg_->update_policy(
                      "t", "a",
                      [&](ContainerPolicy* p) {
                        seen = *p;
                        p->priority = 2;
                        return Status::ok();
                      },
                      &updated)
                  .is_ok());
  EXPECT_TRUE(seen == some_policy());
  ContainerPolicy want = some_policy();
  want.priority = 2;
  EXPECT_TRUE(updated.policy == want);

  // Read back by every reader, also after the store is reopened.
  reopen_registry();
  ContainerInfo got;
  ASSERT_TRUE(reg_->get_container("t", "a", &got).is_ok());
  EXPECT_TRUE(got.policy == want);
  std::vector<ContainerInfo> all;
  ASSERT_TRUE(reg_->list_containers("t", &all).is_ok());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].policy == want);
  EXPECT_TRUE(all[1].policy == ContainerPolicy{});  // b was not touched
  std::vector<KeyValue> records;
  int64_t rev = 0;
  ASSERT_TRUE(
      store_->range(std::string(Registry::kContainerPrefix) + "t/a", &records, &rev).is_ok());
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(Registry::decode_container(records[0], &got));
  EXPECT_TRUE(got.policy == want);
}

TEST_P(RegistryTest, AFailedPolicyEditChangesNothingAndReturnsItsError) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  ContainerInfo a, out;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  ASSERT_TRUE(reg_->update_policy("t", "a", set_some_policy, &out).is_ok());
  KeyValue before;
  ASSERT_TRUE(store_->get(std::string(Registry::kContainerPrefix) + "t/a", &before).is_ok());

  Status st = reg_->update_policy(
      "t", "a",
      [](ContainerPolicy* p) {
        p->priority = 1;  // changed, then refused: must not be written
        return Status::error(Status::Code::kExhausted, "edit refused");
      },
      &out);
  EXPECT_EQ(st.code(), Code::kExhausted);
  EXPECT_EQ(st.message(), "edit refused");
  KeyValue after;
  ASSERT_TRUE(store_->get(std::string(Registry::kContainerPrefix) + "t/a", &after).is_ok());
  EXPECT_EQ(after.value, before.value);
  EXPECT_EQ(after.mod_revision, before.mod_revision);  // not even rewritten
  ContainerInfo got;
  ASSERT_TRUE(reg_->get_container("t", "a", &got).is_ok());
  EXPECT_TRUE(got.policy == some_policy());
}

TEST_P(RegistryTest, UpdatePolicyOfAnUnknownContainerIsNotFound) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  ContainerInfo a, out;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  bool called = false;
  auto edit = [&](ContainerPolicy*) {
    called = true;
    return Status::ok();
  };
  EXPECT_EQ(reg_->update_policy("t", "zz", edit, &out).code(), Code::kNotFound);
  EXPECT_EQ(reg_->update_policy("other", "a", edit, &out).code(), Code::kNotFound);
  EXPECT_FALSE(called);
  std::vector<ContainerInfo> all;
  ASSERT_TRUE(reg_->list_containers("", &all).is_ok());
  EXPECT_EQ(all.size(), 1u);  // nothing created
}

TEST_P(RegistryTest, AMovedContainerKeepsItsPolicy) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  ContainerInfo a, out, moved;
  ASSERT_TRUE(reg_->add_container("t", "n", "a", "h1", 0, &a).is_ok());
  ASSERT_TRUE(reg_->update_policy("t", "a", set_some_policy, &out).is_ok());
  ASSERT_TRUE(reg_->move_container("t", "a", "h2", &moved).is_ok());
  EXPECT_TRUE(moved.policy == some_policy());
  ContainerInfo got;
  ASSERT_TRUE(reg_->get_container("t", "a", &got).is_ok());
  EXPECT_EQ(got.host, "h2");
  EXPECT_TRUE(got.policy == some_policy());
}

// Two orchestrators (here: threads with their own Registry) placing containers at once.
TEST_P(RegistryTest, RacingPlacementsNeverShareAnAddressOrALid) {
  ASSERT_TRUE(reg_->add_tenant("t").is_ok());
  ASSERT_TRUE(reg_->add_network("t", "n", "198.18.1.0/24").is_ok());
  add_host("h1", 1, 1000);
  constexpr int kThreads = 3;
  constexpr int kEach = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Registry mine(store_.get());
      for (int i = 0; i < kEach; ++i) {
        ContainerInfo c;
        Status st = mine.add_container("t", "n", "c" + std::to_string(t) + "-" + std::to_string(i),
                                       "h1", 0, &c);
        EXPECT_TRUE(st.is_ok()) << st.message();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<ContainerInfo> all;
  ASSERT_TRUE(reg_->list_containers("", &all).is_ok());
  std::set<uint32_t> vips;
  std::set<uint16_t> lids;
  for (const ContainerInfo& c : all) {
    vips.insert(c.vip);
    lids.insert(c.lid);
    EXPECT_NE(c.lid, 0);
  }
  EXPECT_EQ(all.size(), size_t{kThreads * kEach});
  EXPECT_EQ(vips.size(), all.size());
  EXPECT_EQ(lids.size(), all.size());
}

INSTANTIATE_TEST_SUITE_P(Backends, RegistryTest, ::testing::Values("sqlite", "etcd"),
                         test_support::backend_name);

// How routers read a container's record from a watch: the policy with the placement, and a
// record whose policy keys do not parse is malformed as a whole.
TEST(DecodeContainerTest, ReadsThePolicyAndRefusesAMalformedOne) {
  const std::string key = std::string(Registry::kContainerPrefix) + "t/a";
  const std::string placement = R"("network": "n", "host": "h1", "vip": "198.18.1.2", "lid": 3)";
  ContainerInfo c;
  ASSERT_TRUE(Registry::decode_container(
      {key, "{" + placement + R"(, "quota": {"qp": 4}, "ratelimit": {"rate": 1000},
                                   "priority": 6})"},
      &c));
  EXPECT_EQ(c.name, "a");
  EXPECT_EQ(c.lid, 3);
  ContainerPolicy want;
  want.quota[static_cast<size_t>(QuotaKind::kQp)] = 4;
  want.rate_bps = 1000;
  want.priority = 6;
  EXPECT_TRUE(c.policy == want);

  ASSERT_TRUE(Registry::decode_container({key, "{" + placement + "}"}, &c));
  EXPECT_TRUE(c.policy == ContainerPolicy{});  // a record from before policies

  for (const char* bad : {R"(, "priority": 8)", R"(, "quota": {"qp": -1})",
                          R"(, "ratelimit": {"rate": "fast"})", R"(, "quota": {"gpu": 1})"})
    EXPECT_FALSE(Registry::decode_container({key, "{" + placement + bad + "}"}, &c)) << bad;
}

TEST(CidrTest, ParsesOnlyWellFormedBlocks) {
  Cidr c;
  ASSERT_TRUE(parse_cidr("198.18.0.0/15", &c));
  EXPECT_EQ(c.prefix, 15);
  EXPECT_TRUE(c.contains(ip("198.19.255.255")));
  EXPECT_FALSE(c.contains(ip("198.20.0.0")));
  for (const char* bad : {"", "198.18.0.0", "198.18.0.0/", "198.18.0.0/33", "198.18.0/16",
                          "198.18.0.0.0/16", "198.018.0.0/16", " 198.18.0.0/16", "198.18.0.1/16",
                          "198.18.0.0/-1", "198.18.0.0/016", "256.0.0.0/8"})
    EXPECT_FALSE(parse_cidr(bad, &c)) << bad;
  Cidr a, b;
  ASSERT_TRUE(parse_cidr("10.0.0.0/8", &a));
  ASSERT_TRUE(parse_cidr("10.1.0.0/16", &b));
  EXPECT_TRUE(overlaps(a, b));
  EXPECT_TRUE(overlaps(b, a));
  ASSERT_TRUE(parse_cidr("11.0.0.0/8", &b));
  EXPECT_FALSE(overlaps(a, b));
  EXPECT_EQ(format_ipv4(ip("1.2.3.4")), "1.2.3.4");
}

}  // namespace
}  // namespace wharf::control
