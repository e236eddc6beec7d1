// tools/wharf-oci-hook/rootfs_sysfs.h: the hook mounts only on the sysfs the runtime mounted
// under the container's root, reached without following anything the image put there.
#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "rootfs_sysfs.h"

namespace wharf::oci_hook {
namespace {

class OciHookRootfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wharf-oci-rootfs.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(OciHookRootfsTest, TheHostsOwnSysfsUnderRootSlashIsAccepted) {
  std::string dir, why;
  ASSERT_EQ(container_sysfs_class("/", &dir, &why), 0) << why;
  EXPECT_EQ(dir, "/sys/class");
}

TEST_F(OciHookRootfsTest, ASymlinkedSysInTheImageIsRefusedNotFollowed) {
  std::filesystem::create_symlink("/sys", root_ + "/sys");
  std::string dir, why;
  EXPECT_EQ(container_sysfs_class(root_, &dir, &why), ELOOP);
  EXPECT_FALSE(why.empty());
  std::filesystem::remove(root_ + "/sys");
  std::filesystem::create_directory(root_ + "/sys");
  std::filesystem::create_symlink("/sys/class", root_ + "/sys/class");
  EXPECT_EQ(container_sysfs_class(root_, &dir, &why), ELOOP);
}

TEST_F(OciHookRootfsTest, ADirectoryThatIsNotSysfsIsRefused) {
  std::filesystem::create_directories(root_ + "/sys/class");
  std::string dir, why;
  EXPECT_EQ(container_sysfs_class(root_, &dir, &why), ENOTDIR);
  EXPECT_NE(why.find("sysfs"), std::string::npos) << why;
}

TEST_F(OciHookRootfsTest, AMissingRootOrSysIsAnError) {
  std::string dir, why;
  EXPECT_EQ(container_sysfs_class(root_ + "/none", &dir, &why), ENOENT);
  EXPECT_EQ(container_sysfs_class(root_, &dir, &why), ENOENT);
}

}  // namespace
}  // namespace wharf::oci_hook
