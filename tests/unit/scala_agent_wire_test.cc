// wharf-scala between two hosts: the messages of the agent protocol (tools/wharf-scala/
// agent_wire.h), what they refuse, and how a sampled tally weighs in the merged percentiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../tools/wharf-scala/agent_wire.h"

namespace wharf::scala {
namespace {

using nlohmann::json;

PointSpec a_point() {
  PointSpec p;
  p.ql = 16;
  p.qr = 3;
  p.size = 64;
  p.opcode = Opcode::kRead;
  p.qp_type = IBV_QPT_UC;
  p.shared_cq = false;
  p.srq = true;
  p.inline_data = true;
  p.mrs = 4;
  p.mr_size = 1 << 20;
  p.rules = 10;
  return p;
}

TEST(AgentWire, APointAndItsRunOptionsSurviveTheWire) {
  RunOptions o;
  o.depth = 8;
  o.threads = 3;
  o.measure_s = 0.25;
  const json j = agent::point_to_json(a_point(), o);
  PointSpec p;
  RunOptions back;
  std::string error;
  ASSERT_TRUE(agent::point_from_json(j, &p, &back, &error)) << error;
  EXPECT_EQ(agent::point_to_json(p, back), j);
  EXPECT_EQ(p.opcode, Opcode::kRead);
  EXPECT_EQ(p.qp_type, IBV_QPT_UC);
  EXPECT_EQ(back.threads, 3u);
}

TEST(AgentWire, RefusesPointsNoSweepCouldAskFor) {
  const json good = agent::point_to_json(a_point(), RunOptions{});
  const std::vector<std::pair<const char*, json>> bad = {
      {"ql", 0},          {"qr", 1 << 21}, {"mrs", 0},      {"mr_size", 32},
      {"mrs", 1024},      {"networks", 2}, {"rules", 5000}, {"opcode", "cas"},
      {"qp_type", "xrc"}, {"threads", 65}, {"depth", 0},    {"measure_s", 61},
      {"warmup_s", -1},   {"srq", 1},      {"size", 1.5},   {"events", "yes"}};
  for (const auto& [key, value] : bad) {
    json j = good;
    j[key] = value;
    PointSpec p;
    RunOptions o;
    std::string error;
    EXPECT_FALSE(agent::point_from_json(j, &p, &o, &error)) << key << " " << value;
    EXPECT_FALSE(error.empty()) << key;
  }
  json missing = good;
  missing.erase("rules");
  PointSpec p;
  RunOptions o;
  std::string error;
  EXPECT_FALSE(agent::point_from_json(missing, &p, &o, &error));
  EXPECT_NE(error.find("rules"), std::string::npos);
}

TEST(AgentWire, AHalfsInfoSurvivesTheWireAndBadOnesAreRefused) {
  HalfInfo h;
  h.lid = 7;
  h.gid[0] = 0xfe;
  h.gid[15] = 9;
  h.link_layer = IBV_LINK_LAYER_ETHERNET;
  h.mtu = IBV_MTU_4096;
  h.mrs = {{0x7f0000001000, 0x1234}, {0x7f0000100000, 0xabcd}};
  h.qps = {0x11, 0x12, 0xffffff};
  const json j = agent::info_to_json(h);
  HalfInfo back;
  std::string error;
  ASSERT_TRUE(agent::info_from_json(j, &back, &error)) << error;
  EXPECT_EQ(agent::info_to_json(back), j);
  EXPECT_EQ(back.mrs[1].rkey, 0xabcdu);
  for (const auto& [key, value] :
       std::vector<std::pair<const char*, json>>{{"gid", json::array({1, 2, 3})},
                                                 {"qps", json::array({1 << 24})},
                                                 {"mrs", json::array({json::array({1})})},
                                                 {"mtu", 0},
                                                 {"lid", 70000}}) {
    json b = j;
    b[key] = value;
    EXPECT_FALSE(agent::info_from_json(b, &back, &error)) << key;
  }
}

TEST(AgentWire, ALongTallyGoesAsAWeightedSample) {
  Tally t;
  t.bytes = 1000;
  t.messages = 10;
  for (uint64_t i = 0; i < 3 * agent::kMaxTallyLatencies; ++i) t.latencies.push_back(i % 100);
  Tally back;
  std::string error;
  ASSERT_TRUE(agent::tally_from_json(agent::tally_to_json(t), &back, &error)) << error;
  EXPECT_EQ(back.latencies.size(), agent::kMaxTallyLatencies);
  EXPECT_DOUBLE_EQ(back.weight, 3);
  EXPECT_EQ(back.bytes, 1000u);
  json bad = agent::tally_to_json(t);
  bad["weight"] = 0.5;
  EXPECT_FALSE(agent::tally_from_json(bad, &back, &error));
}

TEST(AgentWire, SampledLatenciesWeighAsManyAsTheyStandFor) {
  // Here: 100 requests of 10 us. There: 300 of 50 us, sent as a sample of 100. The median
  // of the 400 is 50 us; counting the sample as 100 would make it 10 or 30.
  Tally here;
  here.messages = 100;
  here.latencies.assign(100, 10'000);
  Tally there;
  there.messages = 300;
  there.latencies.assign(100, 50'000);
  there.weight = 3;
  std::vector<Tally> both = {here, there};
  const PointResult r = summarize(both, 1.0);
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.lat_p50_us, 50);
  EXPECT_DOUBLE_EQ(r.mrate_mps, 400 / 1e6);
  there.weight = 1;
  std::vector<Tally> unweighted = {here, there};
  EXPECT_DOUBLE_EQ(summarize(unweighted, 1.0).lat_p50_us, 50);  // the 101st of 200 is 50 us
  here.latencies.assign(300, 10'000);
  std::vector<Tally> more_here = {here, there};
  EXPECT_DOUBLE_EQ(summarize(more_here, 1.0).lat_p50_us, 10);
}

// Regression (review): an error text cut in the middle of a UTF-8 character made the JSON
// writer throw, which ended the agent (its reply) or lost a sweep's results (its file).
TEST(AgentWire, TextIsCutOnACharactersBoundary) {
  std::string e;
  for (int i = 0; i < 600; ++i) e += "\xc3\xa9";  // 1,200 bytes of U+00E9
  EXPECT_EQ(agent::clip(e, 7), "\xc3\xa9\xc3\xa9\xc3\xa9");
  EXPECT_EQ(agent::clip("short", 7), "short");
  Tally t;
  t.error = e;
  Tally back;
  std::string error;
  ASSERT_TRUE(agent::tally_from_json(agent::tally_to_json(t), &back, &error)) << error;
  EXPECT_EQ(back.error.size(), 1024u);
  EXPECT_NO_THROW(agent::tally_to_json(back).dump());
  EXPECT_NO_THROW((json{{"error", "unexpected \"" + agent::clip(e, 33) + "\""}}.dump()));
}

TEST(AgentWire, AGreetingIsReadWithinBounds) {
  const agent::Greeting g{"mlx5_0", 32768, ""};
  agent::Greeting back;
  std::string error;
  ASSERT_TRUE(agent::greeting_from_json(agent::greeting_to_json(g), &back, &error)) << error;
  EXPECT_EQ(back.device, "mlx5_0");
  EXPECT_EQ(back.max_qp_wr, 32768u);
  for (const auto& [key, value] :
       std::vector<std::pair<const char*, json>>{{"version", 2},
                                                 {"max_qp_wr", 1e30},
                                                 {"max_qp_wr", -1},
                                                 {"max_qp_wr", 0},
                                                 {"device", 7},
                                                 {"no_rules", nullptr}}) {
    json b = agent::greeting_to_json(g);
    b[key] = value;
    EXPECT_FALSE(agent::greeting_from_json(b, &back, &error)) << key << " " << value;
  }
}

// Regression (review): the agent merged every thread's latencies before sampling them, up to
// 64 x 4 Mi of them. Each thread's share is sampled in proportion instead.
TEST(AgentWire, MergedThreadsAreSampledInProportion) {
  std::vector<Tally> threads(2);
  threads[0].latencies.assign(3 * agent::kMaxTallyLatencies, 10);
  threads[1].latencies.assign(agent::kMaxTallyLatencies, 20);
  threads[0].messages = 3;
  threads[1].messages = 1;
  const Tally all = agent::merge(threads);
  EXPECT_EQ(all.messages, 4u);
  ASSERT_EQ(all.latencies.size(), agent::kMaxTallyLatencies);
  EXPECT_DOUBLE_EQ(all.weight, 4);
  EXPECT_EQ(std::count(all.latencies.begin(), all.latencies.end(), 10u),
            static_cast<long>(3 * agent::kMaxTallyLatencies / 4));
  EXPECT_TRUE(agent::merge({}).latencies.empty());
}

TEST(AgentWire, AFrameBodyMustBeOneObject) {
  json j;
  std::string error;
  EXPECT_TRUE(agent::parse_body(R"({"op":"go"})", &j, &error));
  for (const char* bad : {"", "[1]", "{", "\"op\"", "{} {}", "nul"}) {
    EXPECT_FALSE(agent::parse_body(bad, &j, &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
}

}  // namespace
}  // namespace wharf::scala
