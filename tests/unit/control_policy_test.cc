// Container policies as operators write them: rates and sizes in tc's units (control/units.h),
// and the policy's JSON form and change requests (control/policy_json.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "control/policy_json.h"
#include "control/units.h"

namespace wharf::control {
namespace {

using Code = Status::Code;
using nlohmann::json;

constexpr uint64_t kUnlimited = ContainerPolicy::kUnlimited;
constexpr uint64_t kKi = 1024;

// ---- units ----

struct Good {
  const char* text;
  uint64_t value;
};

TEST(UnitsTest, RatesInEveryUnitIncludingFractionsAndBytes) {
  const Good cases[] = {
      {"0", 0},
      {"1000", 1000},  // no unit: bit/s
      {"1bit", 1},
      {"100kbit", 100'000},
      {"100mbit", 100'000'000},
      {"1gbit", 1'000'000'000},
      {"2.5gbit", 2'500'000'000},
      {"0.001gbit", 1'000'000},
      {"2.01mbit", 2'010'000},  // 2.01 * 1e6 is 2009999.99... in doubles: rounded
      {".5mbit", 500'000},
      {"10.mbit", 10'000'000},
      {"1tbit", 1'000'000'000'000},
      {"1kibit", kKi},
      {"1mibit", kKi * kKi},
      {"1.5gibit", 3 * kKi * kKi * kKi / 2},
      {"1tibit", kKi * kKi * kKi * kKi},
      {"1bps", 8},  // bytes per second, times 8
      {"125mbps", 1'000'000'000},
      {"1.25kbps", 10'000},
      {"1gbps", 8'000'000'000},
      {"2tbps", 16'000'000'000'000},
      {"16000000tbit", 16'000'000'000'000'000'000u},  // near the top of uint64_t
  };
  for (const Good& c : cases) {
    uint64_t bps = 12345;
    std::string why;
    EXPECT_TRUE(parse_rate(c.text, &bps, &why)) << c.text << ": " << why;
    EXPECT_EQ(bps, c.value) << c.text;
  }
}

TEST(UnitsTest, SizesArePowersOf1024) {
  const Good cases[] = {
      {"0", 0},
      {"512", 512},
      {"512b", 512},
      {"64k", 64 * kKi},
      {"64kb", 64 * kKi},
      {"1.5k", 1536},
      {"1m", kKi * kKi},
      {"2mb", 2 * kKi * kKi},
      {"1g", kKi * kKi * kKi},
      {"1gb", kKi * kKi * kKi},
      {"0.5gb", kKi * kKi * kKi / 2},
      {"1t", kKi * kKi * kKi * kKi},
      {"3tb", 3 * kKi * kKi * kKi * kKi},
  };
  for (const Good& c : cases) {
    uint64_t bytes = 12345;
    std::string why;
    EXPECT_TRUE(parse_size(c.text, &bytes, &why)) << c.text << ": " << why;
    EXPECT_EQ(bytes, c.value) << c.text;
  }
}

struct Bad {
  const char* text;
  const char* why;  // a part of the explanation
};

// Each kind of rejection, with the explanation wharfctl shows.
TEST(UnitsTest, RatesAreRejectedWithAReason) {
  const Bad cases[] = {
      {"", "does not start with a number"},
      {"mbit", "does not start with a number"},
      {".", "does not start with a number"},
      {"+5mbit", "does not start with a number"},
      {"-1", "negative"},
      {"-5mbit", "negative"},
      {"100xbit", "unknown rate unit 'xbit'"},
      {"100mbits", "unknown rate unit 'mbits'"},
      {"100 mbit", "unknown rate unit ' mbit'"},
      {"100mbit ", "unknown rate unit 'mbit '"},
      {"1.2.3mbit", "unknown rate unit '.3mbit'"},
      {"64kb", "unknown rate unit 'kb'"},     // a size unit
      {"18446744073709551616", "too large"},  // 2^64
      {"20000000tbit", "too large"},
      {"1000000000000000000000000000000gbps", "too large"},
  };
  for (const Bad& c : cases) {
    uint64_t bps = 12345;
    std::string why;
    EXPECT_FALSE(parse_rate(c.text, &bps, &why)) << c.text;
    EXPECT_NE(why.find(c.why), std::string::npos) << c.text << ": " << why;
  }
  // Digits beyond what a double can hold are still an overflow, not infinity cast to an integer.
  uint64_t bps = 0;
  std::string why;
  EXPECT_FALSE(parse_rate(std::string(400, '9'), &bps, &why));
  EXPECT_NE(why.find("too large"), std::string::npos) << why;
}

TEST(UnitsTest, SizesAreRejectedWithAReason) {
  const Bad cases[] = {
      {"", "does not start with a number"},
      {"kb", "does not start with a number"},
      {"-64kb", "negative"},
      {"64kib", "unknown size unit 'kib'"},
      {"100mbit", "unknown size unit 'mbit'"},  // a rate unit
      {"16777216tb", "too large"},              // 2^64
  };
  for (const Bad& c : cases) {
    uint64_t bytes = 12345;
    std::string why;
    EXPECT_FALSE(parse_size(c.text, &bytes, &why)) << c.text;
    EXPECT_NE(why.find(c.why), std::string::npos) << c.text << ": " << why;
  }
}

TEST(UnitsTest, FormatRateUsesTheLargestUnitThatKeepsAWholeNumberAndParsesBack) {
  const Good cases[] = {
      {"0bit", 0},
      {"1bit", 1},
      {"999bit", 999},
      {"1kbit", 1000},
      {"1500bit", 1500},
      {"1500kbit", 1'500'000},
      {"100mbit", 100'000'000},
      {"2500mbit", 2'500'000'000},
      {"1gbit", 1'000'000'000},
      {"1000gbit", 1'000'000'000'000},
  };
  for (const Good& c : cases) {
    EXPECT_EQ(format_rate(c.value), c.text);
    uint64_t back = 0;
    std::string why;
    EXPECT_TRUE(parse_rate(format_rate(c.value), &back, &why)) << c.text << ": " << why;
    EXPECT_EQ(back, c.value) << c.text;
  }
}

// BUG (src/control/units.cc, split_number): the number is accumulated in a double, so bare
// integers above 2^53 come back altered and UINT64_MAX is "too large"; format_rate's output
// for such rates does not parse back to the same rate.
TEST(UnitsTest, UnitsAreMatchedWithoutRegardToCaseAsTcDoes) {
  uint64_t v = 0;
  std::string why;
  ASSERT_TRUE(parse_rate("100Mbit", &v, &why)) << why;
  EXPECT_EQ(v, 100'000'000u);
  ASSERT_TRUE(parse_rate("1GBPS", &v, &why)) << why;
  EXPECT_EQ(v, 8'000'000'000u);
  ASSERT_TRUE(parse_size("64KB", &v, &why)) << why;
  EXPECT_EQ(v, 65536u);
}

TEST(UnitsTest, LargeIntegerRatesParseExactly) {
  const Good cases[] = {
      {"9007199254740993", 9'007'199'254'740'993u},  // 2^53 + 1
      {"123456789012345678", 123'456'789'012'345'678u},
      {"18446744073709551615", UINT64_MAX},
  };
  for (const Good& c : cases) {
    uint64_t bps = 0;
    std::string why;
    EXPECT_TRUE(parse_rate(c.text, &bps, &why)) << c.text << ": " << why;
    EXPECT_EQ(bps, c.value) << c.text;
    EXPECT_EQ(format_rate(bps), std::string(c.text) + "bit");
  }
}

// ---- policy JSON ----

ContainerPolicy full_policy() {
  ContainerPolicy p;
  p.quota = {4, 8, 0, 1, 2, uint64_t{1} << 30};  // a quota of 0 is a limit, not "unlimited"
  p.rate_bps = 100'000'000;
  p.qp_rate_bps = 10'000'000;
  p.burst_bytes = 65536;
  p.priority = 5;
  return p;
}

TEST(PolicyJsonTest, APolicyRoundTripsThroughJson) {
  for (const ContainerPolicy& p : {ContainerPolicy{}, full_policy()}) {
    json j = json::object();
    policy_to_json(p, &j);
    ContainerPolicy back;
    back.priority = 3;  // overwritten
    ASSERT_TRUE(policy_from_json(j, &back)) << j.dump();
    EXPECT_TRUE(back == p) << j.dump();
  }
  // The same through text, as the store and the API carry it.
  json j = json::object();
  policy_to_json(full_policy(), &j);
  ContainerPolicy back;
  ASSERT_TRUE(policy_from_json(json::parse(j.dump()), &back));
  EXPECT_TRUE(back == full_policy());
}

TEST(PolicyJsonTest, OnlyLimitedQuotasAndSetRateFieldsAreWritten) {
  json none = json::object();
  policy_to_json(ContainerPolicy{}, &none);
  EXPECT_EQ(none, json::object());  // a policy that limits nothing adds nothing

  ContainerPolicy p;
  p.quota[static_cast<size_t>(QuotaKind::kQp)] = 4;
  p.quota[static_cast<size_t>(QuotaKind::kMr)] = 0;
  p.qp_rate_bps = 1000;
  json j = {{"network", "n"}};  // keys already there stay
  policy_to_json(p, &j);
  EXPECT_EQ(j, json::parse(R"({"network": "n", "quota": {"qp": 4, "mr": 0},
                               "ratelimit": {"qp_rate": 1000}})"));

  json all = json::object();
  policy_to_json(full_policy(), &all);
  EXPECT_EQ(all, json::parse(R"({"quota": {"qp": 4, "cq": 8, "mr": 0, "pd": 1, "srq": 2,
                                           "mr_bytes": 1073741824},
                                 "ratelimit": {"rate": 100000000, "qp_rate": 10000000,
                                               "burst": 65536},
                                 "priority": 5})"));
}

TEST(PolicyJsonTest, AStoredRecordIgnoresOtherKeysButNotMalformedPolicyKeys) {
  ContainerPolicy p = full_policy();
  ASSERT_TRUE(policy_from_json(json::parse(R"({"network": "n", "lid": 7})"), &p));
  EXPECT_TRUE(p == ContainerPolicy{});  // a record without policy keys: no limits

  for (const char* bad : {R"([])", R"({"quota": {"qp": -1}})", R"({"quota": {"xx": 1}})",
                          R"({"ratelimit": {"rate": 1.5}})", R"({"priority": 8})",
                          R"({"quota": 4})", R"({"ratelimit": "fast"})"}) {
    p = full_policy();
    EXPECT_FALSE(policy_from_json(json::parse(bad), &p)) << bad;
    EXPECT_TRUE(p == full_policy()) << bad;  // untouched
  }
}

// ---- change requests ----

ContainerPolicy changed(const char* change, ContainerPolicy p = full_policy()) {
  Status st = apply_policy_change(json::parse(change), &p);
  EXPECT_TRUE(st.is_ok()) << change << ": " << st.message();
  return p;
}

TEST(PolicyChangeTest, PresentKeysReplaceAndAbsentKeysStay) {
  ContainerPolicy want = full_policy();
  want.quota[static_cast<size_t>(QuotaKind::kQp)] = 100;
  want.rate_bps = 1;
  EXPECT_TRUE(changed(R"({"quota": {"qp": 100}, "ratelimit": {"rate": 1}})") == want);

  want = full_policy();
  want.priority = 7;
  EXPECT_TRUE(changed(R"({"priority": 7})") == want);
  EXPECT_TRUE(changed(R"({})") == full_policy());
  EXPECT_TRUE(changed(R"({"quota": {}, "ratelimit": {}})") == full_policy());

  // From nothing, every field can be set.
  EXPECT_TRUE(changed(R"({"quota": {"qp": 4, "cq": 8, "mr": 0, "pd": 1, "srq": 2,
                                    "mr_bytes": 1073741824},
                          "ratelimit": {"rate": 100000000, "qp_rate": 10000000, "burst": 65536},
                          "priority": 5})",
                      ContainerPolicy{}) == full_policy());
}

TEST(PolicyChangeTest, NullClearsAKeyOrAWholeGroup) {
  ContainerPolicy want = full_policy();
  want.quota[static_cast<size_t>(QuotaKind::kMrBytes)] = kUnlimited;
  want.burst_bytes = 0;
  want.priority = 0;
  EXPECT_TRUE(
      changed(R"({"quota": {"mr_bytes": null}, "ratelimit": {"burst": null}, "priority": null})") ==
      want);

  want = full_policy();
  want.quota = ContainerPolicy{}.quota;
  EXPECT_TRUE(changed(R"({"quota": null})") == want);

  want = full_policy();
  want.rate_bps = want.qp_rate_bps = want.burst_bytes = 0;
  EXPECT_TRUE(changed(R"({"ratelimit": null})") == want);

  EXPECT_TRUE(changed(R"({"quota": null, "ratelimit": null, "priority": null})") ==
              ContainerPolicy{});
}

// Every refusal is kInvalidArgument naming the key, and leaves the policy as it was, even
// when an earlier key of the same request was valid.
TEST(PolicyChangeTest, EveryRefusalNamesTheKeyAndChangesNothing) {
  const Bad cases[] = {
      {R"([])", "must be a JSON object"},
      {R"(5)", "must be a JSON object"},
      {R"(null)", "must be a JSON object"},
      {R"({"rate": 5})", "unknown policy key 'rate'"},
      {R"({"quota": {"qp": 1}, "owner": "x"})", "unknown policy key 'owner'"},
      {R"({"quota": 5})", "quota must be an object"},
      {R"({"quota": [1]})", "quota must be an object"},
      {R"({"quota": {"qp": 1, "gpu": 1}})", "unknown quota 'gpu'"},
      {R"({"quota": {"qp": -1}})", "quota qp must not be negative"},
      {R"({"quota": {"mr_bytes": 1.5}})", "quota mr_bytes must be a non-negative integer"},
      {R"({"quota": {"cq": 2.0}})", "quota cq must be a non-negative integer"},
      {R"({"quota": {"pd": "4"}})", "quota pd must be a non-negative integer"},
      {R"({"quota": {"srq": true}})", "quota srq must be a non-negative integer"},
      {R"({"ratelimit": "1gbit"})", "ratelimit must be an object"},
      {R"({"ratelimit": {"ceil": 1}})", "unknown ratelimit 'ceil'"},
      {R"({"quota": {"qp": 1}, "ratelimit": {"rate": -1}})", "rate must not be negative"},
      {R"({"ratelimit": {"rate": 5, "qp_rate": -5}})", "qp_rate must not be negative"},
      {R"({"ratelimit": {"burst": 0.5}})", "burst must be a non-negative integer"},
      {R"({"ratelimit": {"rate": 18446744073709551616}})", "rate must be a non-negative integer"},
      {R"({"priority": 8})", "priority must be 0-7"},
      {R"({"priority": 255})", "priority must be 0-7"},
      {R"({"priority": 256})", "priority must be 0-7"},  // not truncated to 0
      {R"({"priority": -1})", "priority must not be negative"},
      {R"({"priority": 1.0})", "priority must be a non-negative integer"},
      {R"({"quota": {"qp": 9}, "priority": 9})", "priority must be 0-7"},
  };
  for (const Bad& c : cases) {
    ContainerPolicy p = full_policy();
    Status st = apply_policy_change(json::parse(c.text), &p);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(c.why), std::string::npos) << c.text << ": " << st.message();
    EXPECT_TRUE(p == full_policy()) << c.text;
  }
}

// BUG (src/control/policy_json.cc, read_count): a non-negative integer held by a json as a
// signed number (what json{{"priority", 5}} builds in C++, as opposed to parsed text) is
// refused with "priority must not be negative".
TEST(PolicyChangeTest, ANonNegativeSignedJsonIntegerIsAccepted) {
  ContainerPolicy p;
  Status st = apply_policy_change(json{{"priority", 5}, {"quota", {{"qp", 4}}}}, &p);
  EXPECT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(p.priority, 5);
  EXPECT_EQ(p.limit(QuotaKind::kQp), 4u);
}

}  // namespace
}  // namespace wharf::control
