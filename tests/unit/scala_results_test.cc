// The sweep file (scala/results.h): what sweep writes, fit, walls and plot read back; anything
// malformed is refused with a reason.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "scala/results.h"

namespace wharf::scala {
namespace {

SweepFile example() {
  SweepFile f;
  f.local = "wharf0 (router /run/wharf-lab/h1/wharfd.sock)";
  f.remote = "wharf0 (router /run/wharf-lab/h2/wharfd.sock)";
  f.full_factorial = 1297920;
  f.runnable = 318058;
  f.t = 2;
  f.covering_rows = 27;
  f.planned = 3;
  f.budget_s = 120;
  f.elapsed_s = 2.5;
  f.measure_s = 0.3;
  f.depth = 2;
  f.threads = 1;
  Sample a;
  a.at = f.space.baseline();
  a.phase = "scan:ql";
  a.bw_gbps = 12.5;
  a.mrate_mps = 0.38;
  a.lat_p50_us = 41.5;
  a.lat_p99_us = 90;
  Sample b = a;
  b.at[0] = 12;  // ql=256
  b.bw_gbps = 2;
  Sample c = a;
  c.ok = false;
  c.error = "ibv_create_qp: Cannot allocate memory";
  f.samples = {a, b, c};
  return f;
}

TEST(SweepFile, RoundTrips) {
  const SweepFile f = example();
  SweepFile g;
  std::string error;
  ASSERT_TRUE(from_json(to_json(f), &g, &error)) << error;
  EXPECT_EQ(g.local, f.local);
  EXPECT_EQ(g.full_factorial, f.full_factorial);
  EXPECT_EQ(g.runnable, f.runnable);
  EXPECT_EQ(g.covering_rows, 27u);
  ASSERT_EQ(g.samples.size(), 3u);
  EXPECT_EQ(g.samples[1].at, f.samples[1].at);
  EXPECT_DOUBLE_EQ(g.samples[1].bw_gbps, 2);
  EXPECT_FALSE(g.samples[2].ok);
  EXPECT_EQ(g.samples[2].error, f.samples[2].error);
  EXPECT_EQ(g.space.dims().size(), f.space.dims().size());
}

TEST(SweepFile, SaysHowManyFewerPointsRanThanTheFullFactorial) {
  const nlohmann::json j = nlohmann::json::parse(to_json(example()));
  EXPECT_EQ(j["plan"]["full_factorial"], 1297920);
  EXPECT_EQ(j["plan"]["points_run"], 3);
  EXPECT_NEAR(j["plan"]["fewer_than_full_factorial"].get<double>(), 1297920.0 / 3, 1e-6);
}

// Each mutation of a good file, and the reason it must be refused.
TEST(SweepFile, RefusesMalformedFiles) {
  const nlohmann::json good = nlohmann::json::parse(to_json(example()));
  auto refused = [](const nlohmann::json& j) {
    SweepFile f;
    std::string error;
    const bool ok = from_json(j.dump(), &f, &error);
    return !ok && !error.empty();
  };
  EXPECT_FALSE(refused(good));
  nlohmann::json j = good;
  j["wharf_scala"] = 2;
  EXPECT_TRUE(refused(j)) << "another version";
  j = good;
  j.erase("space");
  EXPECT_TRUE(refused(j)) << "no space";
  j = good;
  j["points"][0]["config"]["ql"] = "3";
  EXPECT_TRUE(refused(j)) << "a level the space lacks";
  j = good;
  j["points"][0]["config"].erase("qr");
  EXPECT_TRUE(refused(j)) << "a dimension unset";
  j = good;
  j["points"][0]["bw_gbps"] = -1;
  EXPECT_TRUE(refused(j)) << "negative bandwidth";
  j = good;
  j["points"][0]["lat_p50_us"] = "fast";
  EXPECT_TRUE(refused(j)) << "a number that is text";
  j = good;
  j["space"][1]["name"] = "ql";
  EXPECT_TRUE(refused(j)) << "a dimension twice";
  j = good;
  j["space"][0]["levels"] = {"1", "4", "2"};
  EXPECT_TRUE(refused(j)) << "numeric levels out of order";
  j = good;
  j["space"][0]["baseline"] = "7";
  EXPECT_TRUE(refused(j)) << "a baseline that is no level";
  EXPECT_TRUE(refused(nlohmann::json::array())) << "not an object";
  SweepFile f;
  std::string error;
  EXPECT_FALSE(from_json("{\"wharf_scala\": 1,", &f, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace wharf::scala
