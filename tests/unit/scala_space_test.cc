// Tests for wharf-scala's test space (scala/space.h): numbers with suffixes, the default space
// as documented, reading assignments, the full factorial, and replacing levels from the
// command line's NAME=RANGE.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "scala/space.h"

namespace wharf::scala {
namespace {

std::vector<std::string> levels_of(const Space& space, std::string_view name) {
  return space.dims()[static_cast<size_t>(space.index_of(name))].levels;
}

std::string baseline_of(const Space& space, std::string_view name) {
  const Dimension& d = space.dims()[static_cast<size_t>(space.index_of(name))];
  return d.levels[d.baseline];
}

TEST(ParseNumber, ReadsPlainNumbersAndPowerOf1024Suffixes) {
  const struct {
    const char* text;
    double value;
  } cases[] = {
      {"0", 0},
      {"64", 64},
      {"007", 7},
      {"4k", 4096},
      {"4K", 4096},
      {"1m", 1 << 20},
      {"16M", 16 << 20},
      {"2g", 2.0 * (1 << 30)},
      {"9007199254740992", 9007199254740992.0},  // 2^53
      {"8388608g", 9007199254740992.0},          // 2^23 * 2^30
  };
  for (const auto& c : cases) {
    double value = -1;
    EXPECT_TRUE(parse_number(c.text, &value)) << c.text;
    EXPECT_EQ(value, c.value) << c.text;
  }
}

TEST(ParseNumber, RejectsAnythingElse) {
  for (const char* text : {"", "-1", "+1", "1.5", "1e3", "k", "4kb", "4kk", "4 k", " 4", "4 ",
                           "0x10", "4t", "9007199254740993", "8388609g", "99999999999999999999"}) {
    double value = -1;
    EXPECT_FALSE(parse_number(text, &value)) << '"' << text << '"';
  }
}

TEST(DefaultSpace, HasTheDocumentedDimensionsInOrder) {
  const Space space = default_space();
  std::vector<std::string> names;
  for (const Dimension& d : space.dims()) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ql", "qr", "size", "opcode", "qp_type", "cq", "srq",
                                             "inline", "mrs", "mr_size", "networks", "rules"}));
  const std::vector<std::string> qps = {"1",  "2",  "4",  "8",   "16",  "32", "48",
                                        "64", "80", "96", "128", "192", "256"};
  EXPECT_EQ(levels_of(space, "ql"), qps);
  EXPECT_EQ(levels_of(space, "qr"), qps);
  EXPECT_EQ(levels_of(space, "size"), (std::vector<std::string>{"8", "64", "4k", "64k"}));
  EXPECT_EQ(levels_of(space, "opcode"),
            (std::vector<std::string>{"send", "write", "read", "atomic"}));
  EXPECT_EQ(levels_of(space, "qp_type"), (std::vector<std::string>{"rc", "uc", "ud"}));
  EXPECT_EQ(levels_of(space, "cq"), (std::vector<std::string>{"shared", "per_qp"}));
  EXPECT_EQ(levels_of(space, "srq"), (std::vector<std::string>{"off", "on"}));
  EXPECT_EQ(levels_of(space, "inline"), (std::vector<std::string>{"off", "on"}));
  EXPECT_EQ(levels_of(space, "mrs"), (std::vector<std::string>{"1", "4", "16", "64"}));
  EXPECT_EQ(levels_of(space, "mr_size"),
            (std::vector<std::string>{"4k", "64k", "1m", "4m", "16m"}));
  EXPECT_EQ(levels_of(space, "networks"), (std::vector<std::string>{"1", "10", "100", "1000"}));
  EXPECT_EQ(levels_of(space, "rules"), (std::vector<std::string>{"0", "10", "100", "1000"}));
}

TEST(DefaultSpace, NumericAndScaleDimensionsAreMarked) {
  const Space space = default_space();
  for (const Dimension& d : space.dims()) {
    const bool numeric = d.name == "ql" || d.name == "qr" || d.name == "size" || d.name == "mrs" ||
                         d.name == "mr_size" || d.name == "networks" || d.name == "rules";
    EXPECT_EQ(d.numeric, numeric) << d.name;
    EXPECT_EQ(d.scale, numeric && d.name != "size") << d.name;
  }
}

TEST(DefaultSpace, BaselinesAreTheDocumentedLevels) {
  const Space space = default_space();
  const Assignment base = space.baseline();
  ASSERT_EQ(base.size(), space.size());
  const std::pair<const char*, const char*> expected[] = {
      {"ql", "4"},       {"qr", "4"},        {"size", "4k"},    {"opcode", "write"},
      {"qp_type", "rc"}, {"cq", "shared"},   {"srq", "off"},    {"inline", "off"},
      {"mrs", "1"},      {"mr_size", "64k"}, {"networks", "1"}, {"rules", "0"},
  };
  for (const auto& [name, level] : expected) {
    EXPECT_EQ(space.level(base, name), level) << name;
    EXPECT_EQ(baseline_of(space, name), level) << name;
  }
}

TEST(Space, FullFactorialIsTheProductOfLevelCounts) {
  EXPECT_EQ(default_space().full_factorial(), 13u * 13 * 4 * 4 * 3 * 2 * 2 * 2 * 4 * 5 * 4 * 4);
}

TEST(Space, FullFactorialSaturates) {
  std::vector<Dimension> dims;
  for (int i = 0; i < 20; ++i)  // 10^20 > 2^64
    dims.push_back({.name = "d" + std::to_string(i),
                    .levels = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
                    .numeric = true});
  EXPECT_EQ(Space(dims).full_factorial(), UINT64_MAX);
}

TEST(Space, IndexOfFindsDimensionsByName) {
  const Space space = default_space();
  EXPECT_EQ(space.index_of("ql"), 0);
  EXPECT_EQ(space.index_of("mr_size"), 9);
  EXPECT_EQ(space.index_of("nope"), -1);
  EXPECT_EQ(space.index_of(""), -1);
}

TEST(Space, LevelAndNumberReadAnAssignment) {
  const Space space = default_space();
  Assignment a = space.baseline();
  a[static_cast<size_t>(space.index_of("mr_size"))] = 2;  // 1m
  EXPECT_EQ(space.level(a, "size"), "4k");
  EXPECT_EQ(space.number(a, "size"), 4096);
  EXPECT_EQ(space.number(a, "ql"), 4);
  EXPECT_EQ(space.number(a, "mr_size"), 1 << 20);
  EXPECT_EQ(space.level(a, "opcode"), "write");
  EXPECT_TRUE(std::isnan(space.number(a, "opcode"))) << "not numeric";
  EXPECT_EQ(space.level(a, "nope"), "");
  EXPECT_TRUE(std::isnan(space.number(a, "nope")));
}

TEST(Space, UnsetAndMissingEntriesReadAsNothing) {
  const Space space = default_space();
  Assignment a(space.size(), kUnset);
  a[0] = 3;
  EXPECT_EQ(space.level(a, "ql"), "8");
  EXPECT_EQ(space.level(a, "qr"), "");
  EXPECT_TRUE(std::isnan(space.number(a, "qr")));
  const Assignment short_one = {3};  // only ql
  EXPECT_EQ(space.level(short_one, "ql"), "8");
  EXPECT_EQ(space.level(short_one, "mr_size"), "");
  EXPECT_TRUE(std::isnan(space.number(short_one, "mr_size")));
}

TEST(Space, ConstructorRejectsMalformedDimensions) {
  const auto make = [](std::vector<Dimension> dims) { return Space(std::move(dims)); };
  EXPECT_THROW(make({}), std::invalid_argument);
  EXPECT_THROW(make({{.name = "a", .levels = {"x"}}, {.name = "a", .levels = {"y"}}}),
               std::invalid_argument);
  EXPECT_THROW(make({{.name = "", .levels = {"x"}}}), std::invalid_argument);
  EXPECT_THROW(make({{.name = "a", .levels = {}}}), std::invalid_argument);
  EXPECT_THROW(make({{.name = "a", .levels = {"x"}, .baseline = 1}}), std::invalid_argument);
  EXPECT_THROW(make({{.name = "n", .levels = {"4", "2"}, .numeric = true}}), std::invalid_argument);
  EXPECT_THROW(make({{.name = "n", .levels = {"4", "4k", "4096"}, .numeric = true}}),
               std::invalid_argument);
  EXPECT_THROW(make({{.name = "n", .levels = {"four"}, .numeric = true}}), std::invalid_argument);
  EXPECT_NO_THROW(make({{.name = "n", .levels = {"4", "4k"}, .numeric = true, .baseline = 1}}));
}

TEST(SetLevels, TakesACommaListSortedAndDeduplicatedByValue) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels("ql=256,16,1,64,16", &error)) << error;
  EXPECT_EQ(levels_of(space, "ql"), (std::vector<std::string>{"1", "16", "64", "256"}));
  ASSERT_TRUE(space.set_levels("size=4k,8,4096", &error)) << error;
  EXPECT_EQ(levels_of(space, "size"), (std::vector<std::string>{"8", "4k"}));
}

TEST(SetLevels, ExpandsARangeByDoublingUpToItsEnd) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels("size=1k..64k", &error)) << error;
  EXPECT_EQ(levels_of(space, "size"),
            (std::vector<std::string>{"1k", "2k", "4k", "8k", "16k", "32k", "64k"}));
  ASSERT_TRUE(space.set_levels("ql=3..20", &error)) << error;
  EXPECT_EQ(levels_of(space, "ql"), (std::vector<std::string>{"3", "6", "12", "20"}));
  ASSERT_TRUE(space.set_levels("mrs=5..5", &error)) << error;
  EXPECT_EQ(levels_of(space, "mrs"), (std::vector<std::string>{"5"}));
  ASSERT_TRUE(space.set_levels("mr_size=512k..2m", &error)) << error;
  EXPECT_EQ(levels_of(space, "mr_size"), (std::vector<std::string>{"512k", "1m", "2m"}));
}

TEST(SetLevels, KeepsTheBaselineWhenStillALevelElseTakesTheFirst) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels("ql=1,4,16", &error)) << error;
  EXPECT_EQ(baseline_of(space, "ql"), "4");
  ASSERT_TRUE(space.set_levels("qr=8,16", &error)) << error;
  EXPECT_EQ(baseline_of(space, "qr"), "8");
  ASSERT_TRUE(space.set_levels("size=8,4096", &error)) << error;
  EXPECT_EQ(baseline_of(space, "size"), "4096") << "the old baseline 4k by value";
  ASSERT_TRUE(space.set_levels("opcode=send,write", &error)) << error;
  EXPECT_EQ(baseline_of(space, "opcode"), "write");
  ASSERT_TRUE(space.set_levels("qp_type=ud,uc", &error)) << error;
  EXPECT_EQ(baseline_of(space, "qp_type"), "ud");
}

TEST(SetLevels, RestrictsChoicesInTheOrderGiven) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels("opcode=read,send,read", &error)) << error;
  EXPECT_EQ(levels_of(space, "opcode"), (std::vector<std::string>{"read", "send"}));
  // The known choices stay those of the default, not the current levels.
  ASSERT_TRUE(space.set_levels("opcode=atomic", &error)) << error;
  EXPECT_EQ(levels_of(space, "opcode"), (std::vector<std::string>{"atomic"}));
}

TEST(SetLevels, ToleratesSpacesAroundNamesAndItems) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels(" ql = 1, 2 ,4", &error)) << error;
  EXPECT_EQ(levels_of(space, "ql"), (std::vector<std::string>{"1", "2", "4"}));
}

TEST(SetLevels, RejectsBadSpecsAndLeavesTheSpaceAlone) {
  for (const char* spec : {"nope=1", "ql", "ql=", "=1", "ql=1,,4", "ql=1,", "ql=1,x", "ql=1.5",
                           "ql=8..4", "ql=0..8", "ql=1..", "ql=..8", "ql=a..b", "opcode=send,fly",
                           "opcode=send..write", "opcode=", "cq=Shared"}) {
    Space space = default_space();
    std::string error;
    EXPECT_FALSE(space.set_levels(spec, &error)) << spec;
    EXPECT_FALSE(error.empty()) << spec;
    EXPECT_EQ(error.find('\n'), std::string::npos) << spec;
    EXPECT_EQ(levels_of(space, "ql"), levels_of(default_space(), "ql")) << spec;
    EXPECT_EQ(levels_of(space, "opcode"), levels_of(default_space(), "opcode")) << spec;
  }
}

TEST(SetLevels, ErrorsNameTheProblem) {
  Space space = default_space();
  std::string error;
  EXPECT_FALSE(space.set_levels("nope=1", &error));
  EXPECT_NE(error.find("nope"), std::string::npos) << error;
  EXPECT_FALSE(space.set_levels("opcode=fly", &error));
  EXPECT_NE(error.find("fly"), std::string::npos) << error;
  EXPECT_FALSE(space.set_levels("size=4x", &error));
  EXPECT_NE(error.find("4x"), std::string::npos) << error;
}

}  // namespace
}  // namespace wharf::scala
