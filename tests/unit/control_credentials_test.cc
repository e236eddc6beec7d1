// Where a client's token comes from (control/credentials.h): the order of the sources, a file
// read anew at every get(), and the errors of a file that cannot be used.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <optional>
#include <string>

#include "control/credentials.h"
#include "support/temp_dir.h"

namespace wharf::control {
namespace {

// Sets (or, with nullopt, unsets) an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class TokenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "cannot make a temporary directory";
  }

  // A file in the test's directory holding `text`; its path.
  std::string file(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static std::string token(const TokenSource& s) {
    std::string t, why;
    EXPECT_TRUE(s.get(&t, &why)) << why;
    return t;
  }

  test_support::TempDir dir_{"wharf-credentials"};
  ScopedEnv no_file_{"WHARF_TOKEN_FILE", std::nullopt};
  ScopedEnv no_token_{"WHARF_TOKEN", std::nullopt};
};

TEST_F(TokenSourceTest, TheSourcesInTheirOrder) {
  const std::string flag = file("flag", "from-flag\n"), env_file = file("env", " from-env-file ");
  const std::string joined = file("host.token", "from-join");
  EXPECT_EQ(token(TokenSource("", joined)), "from-join");
  EXPECT_EQ(token(TokenSource("", "")), "");  // nowhere: the orchestrator will answer 401
  {
    ScopedEnv t("WHARF_TOKEN", " from-env\n");
    EXPECT_EQ(token(TokenSource("", joined)), "from-env");
    ScopedEnv f("WHARF_TOKEN_FILE", env_file);
    EXPECT_EQ(token(TokenSource("", joined)), "from-env-file");
    EXPECT_EQ(token(TokenSource(flag, joined)), "from-flag");
  }
  // An empty $WHARF_TOKEN is no token: the last resort is used.
  ScopedEnv empty("WHARF_TOKEN", "");
  EXPECT_EQ(token(TokenSource("", joined)), "from-join");
}

TEST_F(TokenSourceTest, AFileIsReadAtEveryGetSoARotatedTokenIsUsed) {
  const std::string path = file("token", "first");
  const TokenSource s(path);
  EXPECT_EQ(token(s), "first");
  file("token", "second\n");
  EXPECT_EQ(token(s), "second");
}

TEST_F(TokenSourceTest, AMissingOrEmptyFileIsAnErrorThatNamesIt) {
  std::string t, why;
  const std::string missing = dir_.path() + "/missing";
  EXPECT_FALSE(TokenSource(missing).get(&t, &why));
  EXPECT_NE(why.find(missing), std::string::npos) << why;
  const std::string blank = file("blank", " \n\t");
  EXPECT_FALSE(TokenSource(blank).get(&t, &why));
  EXPECT_NE(why.find("is empty"), std::string::npos) << why;
  // A last resort that does not exist yet (no join so far) is waited for the same way.
  EXPECT_FALSE(TokenSource("", missing).get(&t, &why));
}

}  // namespace
}  // namespace wharf::control
