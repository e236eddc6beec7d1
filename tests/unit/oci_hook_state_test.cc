// tools/wharf-oci-hook/oci_state.h: the state a runtime hands an OCI hook and the root path of
// its bundle's config.json, read as untrusted text.
#include <gtest/gtest.h>

#include "oci_state.h"

namespace wharf::oci_hook {
namespace {

TEST(OciHookStateTest, ReadsTheIdTheBundleAndTheAnnotations) {
  std::string why;
  const auto s = parse_state(
      R"({"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 42,
          "bundle": "/run/b/c1", "annotations": {"io.wharf.device-view": "true", "x": ""}})",
      &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->id, "c1");
  EXPECT_EQ(s->bundle, "/run/b/c1");
  EXPECT_EQ(s->annotations.size(), 2u);
  EXPECT_TRUE(wants_view(*s));
}

TEST(OciHookStateTest, OnlyTheValueTrueAsksForTheView) {
  std::string why;
  for (const char* value : {R"("false")", R"("TRUE")", R"("1")", R"("")"}) {
    const auto s = parse_state(
        std::string(R"({"id": "c", "bundle": "/b", "annotations": {"io.wharf.device-view": )") +
            value + "}}",
        &why);
    ASSERT_TRUE(s) << why;
    EXPECT_FALSE(wants_view(*s)) << value;
  }
  const auto none = parse_state(R"({"id": "c", "bundle": "/b"})", &why);
  ASSERT_TRUE(none) << why;
  EXPECT_FALSE(wants_view(*none));
}

TEST(OciHookStateTest, RefusesMalformedStatesAndSaysWhy) {
  for (const char* bad :
       {"", "[]", "{", R"({"bundle": "/b"})", R"({"id": "c"})", R"({"id": 7, "bundle": "/b"})",
        R"({"id": "c", "bundle": "b"})", R"({"id": "", "bundle": "/b"})",
        R"({"id": "c", "bundle": "/b", "annotations": []})",
        R"({"id": "c", "bundle": "/b", "annotations": {"a": 1}})"}) {
    std::string why;
    EXPECT_FALSE(parse_state(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(OciHookStateTest, TheRootIsAbsoluteOrUnderTheBundleAndNeverClimbsOut) {
  std::string why;
  EXPECT_EQ(root_path(R"({"root": {"path": "/var/lib/c/merged"}})", "/b", &why),
            "/var/lib/c/merged");
  EXPECT_EQ(root_path(R"({"root": {"path": "rootfs", "readonly": true}})", "/b", &why),
            "/b/rootfs");
  for (const char* bad : {R"({})", R"({"root": "rootfs"})", R"({"root": {"path": ""}})",
                          R"({"root": {"path": "../etc"}})", R"({"root": {"path": "/a/../etc"}})",
                          R"({"root": {"path": "a/.."}})", "not json"}) {
    why.clear();
    EXPECT_FALSE(root_path(bad, "/b", &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_EQ(root_path(R"({"root": {"path": "a/..b/.c"}})", "/b", &why), "/b/a/..b/.c");
}

}  // namespace
}  // namespace wharf::oci_hook
