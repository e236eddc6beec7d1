// is_private_file trusts only a regular file of this user that no other user may read or write.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/private_file.h"

namespace wharf {
namespace {

class PrivateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wharf-private-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    file_ = dir_ + "/f";
    FILE* f = std::fopen(file_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  void TearDown() override {
    ::unlink(file_.c_str());
    ::rmdir(dir_.c_str());
  }
  struct stat stat_of(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return st;
  }
  std::string dir_, file_;
};

TEST_F(PrivateFileTest, AFileOnlyItsOwnerMayReadOrWriteIsTrusted) {
  ASSERT_EQ(::chmod(file_.c_str(), 0600), 0);
  EXPECT_TRUE(is_private_file(stat_of(file_)));
  ASSERT_EQ(::chmod(file_.c_str(), 0400), 0);
  EXPECT_TRUE(is_private_file(stat_of(file_)));
}

TEST_F(PrivateFileTest, AFileTheGroupOrOthersMayReadOrWriteIsNot) {
  for (mode_t mode : {0640, 0620, 0604, 0602, 0610, 0601}) {
    ASSERT_EQ(::chmod(file_.c_str(), mode), 0);
    EXPECT_FALSE(is_private_file(stat_of(file_))) << std::oct << mode;
  }
}

TEST_F(PrivateFileTest, ADirectoryIsNot) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  EXPECT_FALSE(is_private_file(stat_of(dir_)));
}

TEST_F(PrivateFileTest, AnotherUsersFileIsNot) {
  ASSERT_EQ(::chmod(file_.c_str(), 0600), 0);
  struct stat st = stat_of(file_);
  st.st_uid = ::geteuid() + 1;  // as fstat would report a file another user owns
  EXPECT_FALSE(is_private_file(st));
}

}  // namespace
}  // namespace wharf
