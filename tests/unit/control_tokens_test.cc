// The orchestrator's credentials (control/tokens.h) on a SQLite store: tokens verify only
// while they exist and have not expired, the store never holds a secret, and the first start
// writes exactly one admin token to a file only its owner can read.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "control/kv_store.h"
#include "control/tokens.h"
#include "support/temp_dir.h"

namespace wharf::control {
namespace {

constexpr int64_t kNow = 1'764'300'000;

class TokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "cannot make a temporary directory";
    Status st = open_kv_store("sqlite:" + dir_.path() + "/state.db", &store_);
    ASSERT_TRUE(st.is_ok()) << st.message();
    tokens_ = std::make_unique<TokenStore>(store_.get());
  }
  void TearDown() override {
    tokens_.reset();
    store_.reset();
  }
  std::string add(Role role, const std::string& tenant = "", int64_t ttl = 0) {
    std::string token;
    TokenRecord r;
    Status st = tokens_->add(role, tenant, "t", ttl, kNow, &token, &r);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return token;
  }

  test_support::TempDir dir_{"wharf-tokens"};
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<TokenStore> tokens_;
};

TEST_F(TokensTest, ATokenVerifiesAsItsRoleUntilItExpiresOrIsDeleted) {
  const std::string t = add(Role::kTenantAdmin, "red", 60);
  TokenRecord who;
  ASSERT_TRUE(tokens_->verify(t, kNow, &who).is_ok());
  EXPECT_EQ(who.role, Role::kTenantAdmin);
  EXPECT_EQ(who.tenant, "red");
  EXPECT_TRUE(tokens_->verify(t, kNow + 59, &who).is_ok());
  EXPECT_EQ(tokens_->verify(t, kNow + 60, &who).code(), Status::Code::kNotFound);
  const std::string forever = add(Role::kViewer);
  EXPECT_TRUE(tokens_->verify(forever, kNow + 100'000'000, &who).is_ok());
  ASSERT_TRUE(tokens_->del(who.id).is_ok());
  EXPECT_EQ(tokens_->verify(forever, kNow, &who).code(), Status::Code::kNotFound);
  EXPECT_EQ(tokens_->del(who.id).code(), Status::Code::kNotFound);
}

TEST_F(TokensTest, AnAlteredOrMalformedTokenIsRefusedAsAnUnknownOne) {
  const std::string t = add(Role::kAdmin);
  TokenRecord who;
  std::string other_secret = t;
  other_secret.back() = other_secret.back() == 'a' ? 'b' : 'a';
  std::string other_id = t;
  other_id[6] = other_id[6] == 'a' ? 'b' : 'a';
  for (const std::string& bad : {other_secret, other_id, t + "0", t.substr(1), std::string(),
                                 std::string("wharf_") + std::string(81, 'g')})
    EXPECT_EQ(tokens_->verify(bad, kNow, &who).code(), Status::Code::kNotFound) << bad;
}

TEST_F(TokensTest, TheStoreKeepsOnlyTheSecretsHashOutsideTheRawApisPrefix) {
  const std::string t = add(Role::kHost);
  std::vector<KeyValue> kvs;
  int64_t rev = 0;
  ASSERT_TRUE(store_->range("/", &kvs, &rev).is_ok());
  ASSERT_EQ(kvs.size(), 1u);
  EXPECT_EQ(kvs[0].key.rfind("/wharf/", 0), std::string::npos) << kvs[0].key;
  const std::string secret = t.substr(t.rfind('_') + 1);
  EXPECT_EQ(kvs[0].value.find(secret), std::string::npos) << "the store holds the secret";
}

TEST_F(TokensTest, ATenantAdminNeedsATenantAndNoOtherRoleHasOne) {
  std::string token;
  TokenRecord r;
  EXPECT_EQ(tokens_->add(Role::kTenantAdmin, "", "", 0, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(tokens_->add(Role::kAdmin, "red", "", 0, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(tokens_->add(Role::kTenantAdmin, "Not/A/Name", "", 0, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(tokens_->add(Role::kViewer, "", "", -1, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
}

TEST_F(TokensTest, AJoinTokenBelongsToOneHostExpiresWithinAnHourAndIsUsedOnce) {
  std::string token;
  TokenRecord r;
  EXPECT_EQ(tokens_->add(Role::kJoin, "", "", 0, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(tokens_->add(Role::kJoin, "h1,DNS:h2", "", 0, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(tokens_->add(Role::kHost, "h1", "", 0, kNow, &token, &r).code(),
            Status::Code::kInvalidArgument);
  const std::string t = add(Role::kJoin, "h1");
  TokenRecord who;
  ASSERT_TRUE(tokens_->verify(t, kNow, &who).is_ok());
  EXPECT_EQ(who.role, Role::kJoin);
  EXPECT_EQ(who.host, "h1");
  EXPECT_EQ(who.tenant, "");
  EXPECT_EQ(who.expires, kNow + TokenStore::kJoinTtl);
  EXPECT_EQ(tokens_->verify(t, kNow + TokenStore::kJoinTtl, &who).code(), Status::Code::kNotFound);
  bool used = false;
  ASSERT_TRUE(tokens_->use_once(who.id, &used).is_ok());
  EXPECT_TRUE(used);
  ASSERT_TRUE(tokens_->use_once(who.id, &used).is_ok());
  EXPECT_FALSE(used) << "a join token served twice";
  EXPECT_EQ(tokens_->verify(t, kNow, &who).code(), Status::Code::kNotFound);
}

// Records written before join tokens existed have no "host"; they still read.
TEST_F(TokensTest, ARecordWithoutAHostIsAnOlderRecordAndReads) {
  TokenRecord r;
  const std::string sha(64, 'a');
  EXPECT_TRUE(decode_token_record("0123456789abcdef",
                                  R"({"role":"viewer","tenant":"","name":"","created":1,)"
                                  R"("expires":0,"sha256":")" +
                                      sha + "\"}",
                                  &r));
  EXPECT_FALSE(decode_token_record("0123456789abcdef",
                                   R"({"role":"join","tenant":"","name":"","created":1,)"
                                   R"("expires":0,"sha256":")" +
                                       sha + "\"}",
                                   &r))
      << "a join record without its host";
  EXPECT_FALSE(decode_token_record("0123456789abcdef",
                                   R"({"role":"viewer","tenant":"","host":"h1","name":"",)"
                                   R"("created":1,"expires":0,"sha256":")" +
                                       sha + "\"}",
                                   &r))
      << "a host on a viewer's record";
}

TEST_F(TokensTest, TheFirstStartWritesOneAdminTokenReadableByItsOwnerOnly) {
  const std::string path = dir_.path() + "/orchestrator-admin.token";
  {
    std::ofstream old(path);  // a file left by an earlier store is replaced, mode included
    old << "stale\n";
  }
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  bool made = false;
  ASSERT_TRUE(bootstrap_admin_token(tokens_.get(), path, kNow, &made).is_ok());
  EXPECT_TRUE(made);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  TokenRecord who;
  ASSERT_TRUE(tokens_->verify(token, kNow, &who).is_ok());
  EXPECT_EQ(who.role, Role::kAdmin);
  // A second start finds the admin token and makes none.
  ASSERT_TRUE(bootstrap_admin_token(tokens_.get(), path, kNow, &made).is_ok());
  EXPECT_FALSE(made);
  std::vector<TokenRecord> all;
  ASSERT_TRUE(tokens_->list(&all).is_ok());
  EXPECT_EQ(all.size(), 1u);
}

TEST_F(TokensTest, ATokenWhoseFileCannotBeWrittenIsNotKept) {
  bool made = true;
  EXPECT_FALSE(
      bootstrap_admin_token(tokens_.get(), dir_.path() + "/no/such/dir/t", kNow, &made).is_ok());
  EXPECT_FALSE(made);
  std::vector<TokenRecord> all;
  ASSERT_TRUE(tokens_->list(&all).is_ok());
  EXPECT_TRUE(all.empty());
}

}  // namespace
}  // namespace wharf::control
