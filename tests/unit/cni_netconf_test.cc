// wharf-cni's reading of what a runtime gives it (tools/wharf-cni/netconf.h): CNI_ARGS, the
// CNI_* environment, and the configuration with prevResult, including every refusal the
// issue names (no prevResult, an address outside the network) with the spec's error codes.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "netconf.h"

namespace wharf::cni {
namespace {

// A bridge + host-local result: the pod's eth0 is interface 2, inside the sandbox.
const char* kBridgeResult = R"({"cniVersion":"1.0.0",
  "interfaces":[{"name":"br0","mac":"aa:00:00:00:00:01"},
                {"name":"veth1","mac":"aa:00:00:00:00:02"},
                {"name":"eth0","mac":"aa:00:00:00:00:03","sandbox":"/var/run/netns/p"}],
  "ips":[{"interface":2,"address":"198.18.6.7/24","gateway":"198.18.6.1"}],"dns":{}})";

std::string conf(const std::string& extra, const std::string& prev = kBridgeResult) {
  return R"({"cniVersion":"1.0.0","name":"pods","type":"wharf-cni")" + extra +
         (prev.empty() ? "" : R"(,"prevResult":)" + prev) + "}";
}

Invocation invocation(Command c) {
  Invocation inv;
  inv.command = c;
  inv.sandbox = "0123abcd";
  inv.netns = "/var/run/netns/p";
  inv.ifname = "eth0";
  inv.args = {{"K8S_POD_NAMESPACE", "team-a"}, {"K8S_POD_NAME", "trainer-0"}};
  return inv;
}

std::optional<NetConf> read(const std::string& text, Command c, Error* err) {
  return read_netconf(text, invocation(c), "/run/wharf/wharfd.sock", err);
}

TEST(CniArgsTest, ParsesKeyValuePairsAndRefusesOthers) {
  auto args = parse_cni_args("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;;X=");
  ASSERT_TRUE(args);
  EXPECT_EQ((*args)["K8S_POD_NAMESPACE"], "ns");
  EXPECT_EQ((*args)["X"], "");
  EXPECT_EQ(args->size(), 4u);
  EXPECT_FALSE(parse_cni_args("K8S_POD_NAME"));
  EXPECT_FALSE(parse_cni_args("=v"));
  EXPECT_TRUE(parse_cni_args("")->empty());
}

TEST(CniInvocationTest, NamesWhatIsMissing) {
  static std::map<std::string, std::string> env;
  const GetEnv get = [](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Error err;
  env = {{"CNI_COMMAND", "VERSION"}};
  ASSERT_TRUE(read_invocation(get, &err));
  env = {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "c1"}, {"CNI_IFNAME", "eth0"}};
  EXPECT_FALSE(read_invocation(get, &err));
  EXPECT_EQ(err.code, ErrorCode::kInvalidEnvironment);
  EXPECT_NE(err.msg.find("CNI_NETNS"), std::string::npos);
  // DEL may come without a namespace (the spec's words: clean up what can be).
  env["CNI_COMMAND"] = "DEL";
  auto inv = read_invocation(get, &err);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->command, Command::kDel);
  env["CNI_CONTAINERID"] = "../etc";
  EXPECT_FALSE(read_invocation(get, &err));
  EXPECT_NE(err.msg.find("CNI_CONTAINERID"), std::string::npos);
  env = {{"CNI_COMMAND", "STATUS"}};
  EXPECT_FALSE(read_invocation(get, &err));
  EXPECT_EQ(err.code, ErrorCode::kInvalidEnvironment);
}

TEST(CniNetConfTest, TakesThePodAddressTenantAndNetwork) {
  Error err;
  auto nc = read(conf(R"(,"router":"/tmp/r.sock","subnet":"198.18.6.0/24")"), Command::kAdd, &err);
  ASSERT_TRUE(nc) << err.msg;
  EXPECT_EQ(nc->pod_ip, 0xc6120607u);
  EXPECT_EQ(nc->router, "/tmp/r.sock");
  EXPECT_EQ(nc->tenant, "team-a");  // K8S_POD_NAMESPACE
  EXPECT_EQ(nc->network, "pods");   // the network's name
  EXPECT_EQ(pod_name(invocation(Command::kAdd)), "trainer-0");
  nc = read(conf(R"(,"tenant":"t1","network":"n1")"), Command::kAdd, &err);
  ASSERT_TRUE(nc);
  EXPECT_EQ(nc->tenant, "t1");
  EXPECT_EQ(nc->network, "n1");
  EXPECT_EQ(nc->router, "/run/wharf/wharfd.sock");
}

// Of several addresses, the pod's interface's IPv4 one; IPv6 and the host's sides are not
// the pod's virtual IP.
TEST(CniNetConfTest, PicksTheSandboxInterfacesIpv4Address) {
  const std::string prev = R"({"cniVersion":"1.0.0",
    "interfaces":[{"name":"br0"},{"name":"net1","sandbox":"/n"},{"name":"eth0","sandbox":"/n"}],
    "ips":[{"interface":0,"address":"10.0.0.1/24"},{"interface":2,"address":"fd00::5/64"},
           {"interface":1,"address":"198.18.7.9/24"},{"interface":2,"address":"198.18.6.5/24"}]})";
  Error err;
  auto nc = read(conf("", prev), Command::kAdd, &err);
  ASSERT_TRUE(nc) << err.msg;
  EXPECT_EQ(nc->pod_ip, 0xc6120605u);
  // Results from IPAM-only chains carry no interfaces: the first IPv4 address.
  nc = read(conf("", R"({"ips":[{"address":"fd00::1/64"},{"address":"198.18.8.1/16"}]})"),
            Command::kAdd, &err);
  ASSERT_TRUE(nc);
  EXPECT_EQ(nc->pod_ip, 0xc6120801u);
}

TEST(CniNetConfTest, RefusesWhatItCannotUse) {
  struct Case {
    std::string text;
    Command command;
    ErrorCode code;
    const char* says;
  } cases[] = {
      {conf("", ""), Command::kAdd, ErrorCode::kInvalidConfig, "prevResult"},
      {conf("", "{}"), Command::kCheck, ErrorCode::kInvalidConfig, "prevResult"},
      {conf("", R"({"ips":[{"address":"fd00::1/64"}]})"), Command::kAdd, ErrorCode::kInvalidConfig,
       "IPv4"},
      {conf(R"(,"subnet":"198.18.9.0/24")"), Command::kAdd, ErrorCode::kInvalidConfig, "outside"},
      {conf(R"(,"subnet":"198.18.6.1/24")"), Command::kAdd, ErrorCode::kInvalidConfig, "subnet"},
      {conf(R"(,"router":7)"), Command::kAdd, ErrorCode::kInvalidConfig, "router"},
      {conf(R"(,"tenant":"a/b")"), Command::kAdd, ErrorCode::kInvalidConfig, "tenant"},
      {R"({"cniVersion":"0.2.0","name":"pods"})", Command::kAdd, ErrorCode::kIncompatibleVersion,
       "0.2.0"},
      {R"({"cniVersion":"0.3.1","name":"pods","prevResult":{}})", Command::kCheck,
       ErrorCode::kIncompatibleVersion, "CHECK"},
      {"[1,2]", Command::kAdd, ErrorCode::kDecodeFailure, "JSON"},
      {"{\"cniVersion\":", Command::kDel, ErrorCode::kDecodeFailure, "JSON"},
  };
  for (const Case& c : cases) {
    Error err;
    EXPECT_FALSE(read(c.text, c.command, &err)) << c.text;
    EXPECT_EQ(err.code, c.code) << c.text;
    EXPECT_NE(err.msg.find(c.says), std::string::npos) << err.msg;
  }
}

// DEL cleans up with what it is given: no prevResult, no tenant, an empty one.
TEST(CniNetConfTest, DelNeedsOnlyTheRouter) {
  Invocation inv = invocation(Command::kDel);
  inv.args.clear();
  inv.netns.clear();
  Error err;
  EXPECT_TRUE(read_netconf(conf("", "{}"), inv, "/r", &err)) << err.msg;
  EXPECT_TRUE(read_netconf(conf("", ""), inv, "/r", &err)) << err.msg;
}

// VERSION is how a runtime finds out what a plugin speaks: it is answered whatever it asks
// (libcni asks in its own newest version, which may be newer than ours).
TEST(CniVersionTest, AnswersWhateverItIsAsked) {
  EXPECT_EQ(read_version_request(R"({"cniVersion":"0.4.0"})"), "0.4.0");
  EXPECT_EQ(read_version_request(R"({"cniVersion":"1.1.0"})"), "1.0.0");
  EXPECT_EQ(read_version_request("not json"), "1.0.0");
  Error err;
  EXPECT_FALSE(read(R"({"cniVersion":"9.9.9","name":"pods"})", Command::kAdd, &err));
  const std::string j = error_json("", err);
  EXPECT_NE(j.find("\"code\":1"), std::string::npos);
  EXPECT_NE(j.find("\"cniVersion\":\"1.0.0\""), std::string::npos);
}

// Names the router and the orchestrator take (1-63 bytes) for every pod Kubernetes allows,
// the same every time for one pod.
TEST(CniPodNameTest, FitsEveryPodName) {
  Invocation inv = invocation(Command::kAdd);
  EXPECT_EQ(pod_name(inv), "trainer-0");
  inv.args["K8S_POD_NAME"] = std::string(60, 'j') + "-job-x7k2p";  // 70 bytes
  const std::string long_name = pod_name(inv);
  EXPECT_EQ(long_name.size(), 63u);
  EXPECT_EQ(long_name.substr(0, 54), std::string(54, 'j'));
  EXPECT_EQ(pod_name(inv), long_name);
  inv.args["K8S_POD_NAME"] = std::string(60, 'j') + "-job-x7k2q";
  EXPECT_NE(pod_name(inv), long_name);
  inv.args.erase("K8S_POD_NAME");
  inv.sandbox = std::string(64, 'a');  // containerd's and podman's sandbox IDs
  EXPECT_EQ(pod_name(inv), "sandbox-aaaaaaaaaaaa");
  Error err;
  EXPECT_TRUE(read_netconf(conf(""), inv, "/r", &err)) << err.msg;
}

}  // namespace
}  // namespace wharf::cni
