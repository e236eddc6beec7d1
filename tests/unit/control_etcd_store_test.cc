// What is particular to the etcd backend (control/etcd_store.h) against a real etcd on
// loopback: reachability, how etcd's errors and compaction reach callers, binary keys over the
// base64 gateway, watch streams and their shutdown, etcd going away and coming back. The
// behaviour both backends share is tested in control_kv_store_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "control/etcd_store.h"
#include "support/etcd_process.h"
#include "support/free_ports.h"
#include "support/tcp_sockets.h"

namespace wharf::control {
namespace {

using test_support::EtcdProcess;
using Code = Status::Code;
using std::chrono::milliseconds;

// Collects watch events until `count` arrived or `limit` passed.
std::vector<WatchEvent> collect(Watch* w, size_t count, milliseconds limit = milliseconds(5000)) {
  std::vector<WatchEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (events.size() < count && std::chrono::steady_clock::now() < deadline) {
    const Status s = w->next(&events, milliseconds(100));
    EXPECT_TRUE(s.is_ok()) << s.message();
    if (!s.is_ok()) break;
  }
  return events;
}

TEST(EtcdStoreOpenTest, ReportsUnavailableWhereNothingListens) {
  const int port = test_support::free_ports(1);
  ASSERT_NE(port, 0);
  std::unique_ptr<KvStore> store;
  const Status s = open_etcd_store("http://127.0.0.1:" + std::to_string(port), &store);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("no answer from etcd at http://127.0.0.1:"), std::string::npos)
      << s.message();
  EXPECT_EQ(store, nullptr);
}

TEST(EtcdStoreOpenTest, RejectsAnythingButAnHttpUrl) {
  std::unique_ptr<KvStore> store;
  EXPECT_EQ(open_etcd_store("127.0.0.1:2379", &store).code(), Code::kInvalidArgument);
  EXPECT_EQ(open_etcd_store("https://127.0.0.1:2379", &store).code(), Code::kInvalidArgument);
  EXPECT_EQ(open_etcd_store("http://127.0.0.1:2379/v3", &store).code(), Code::kInvalidArgument);
}

// One etcd for the suite (starting one takes about a second); each test uses its own keys.
class EtcdStoreTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (EtcdProcess::available()) etcd_ = new EtcdProcess();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    if (!EtcdProcess::available()) GTEST_SKIP() << EtcdProcess::kMissing;
    ASSERT_TRUE(etcd_->ok());
    std::unique_ptr<KvStore> opened;
    const Status s = open_etcd_store(etcd_->base_url(), &opened);
    ASSERT_TRUE(s.is_ok()) << s.message();
    store_.reset(static_cast<EtcdStore*>(opened.release()));
  }

  static EtcdProcess* etcd_;
  std::unique_ptr<EtcdStore> store_;
};

EtcdProcess* EtcdStoreTest::etcd_ = nullptr;

// httplib writes a request's headers and body separately: with Nagle's algorithm on, every
// call waited 40 ms for etcd's delayed ACK (4 container creations per second instead of 150).
TEST_F(EtcdStoreTest, CallsGoWithoutNaglesDelay) {
  int64_t rev = 0;
  ASSERT_TRUE(store_->put("nodelay/a", "v", 0, &rev).is_ok());  // a connection is open now
  const std::vector<int> fds =
      test_support::connected_sockets(etcd_->client_port(), test_support::PortSide::kRemote);
  ASSERT_FALSE(fds.empty());
  for (int fd : fds) EXPECT_TRUE(test_support::has_nodelay(fd)) << "fd " << fd;
}

TEST_F(EtcdStoreTest, PutWithAnUnknownLeaseIsNotFound) {
  int64_t rev = 0;
  EXPECT_EQ(store_->put("lease/a", "v", 12345, &rev).code(), Code::kNotFound);
  bool succeeded = false;
  EXPECT_EQ(store_->txn({}, {TxnOp::put("lease/a", "v", 12345)}, &succeeded, &rev).code(),
            Code::kNotFound);
  KeyValue kv;
  EXPECT_EQ(store_->get("lease/a", &kv).code(), Code::kNotFound);
}

TEST_F(EtcdStoreTest, KeepAliveAndRevokeOfARevokedLeaseAreNotFound) {
  int64_t lease = 0, rev = 0;
  ASSERT_TRUE(store_->grant_lease(30, &lease).is_ok());
  ASSERT_TRUE(store_->put("revoke/a", "v", lease, &rev).is_ok());
  KeyValue kv;
  ASSERT_TRUE(store_->get("revoke/a", &kv).is_ok());
  EXPECT_EQ(kv.lease, lease);
  EXPECT_TRUE(store_->keep_alive(lease).is_ok());
  ASSERT_TRUE(store_->revoke_lease(lease).is_ok());
  EXPECT_EQ(store_->get("revoke/a", &kv).code(), Code::kNotFound);
  EXPECT_EQ(store_->keep_alive(lease).code(), Code::kNotFound);
  EXPECT_EQ(store_->revoke_lease(lease).code(), Code::kNotFound);
  EXPECT_EQ(store_->grant_lease(0, &lease).code(), Code::kInvalidArgument);
}

TEST_F(EtcdStoreTest, WatchFromACompactedRevisionIsCompacted) {
  int64_t first = 0, rev = 0;
  ASSERT_TRUE(store_->put("compact/a", "1", 0, &first).is_ok());
  ASSERT_TRUE(store_->put("compact/a", "2", 0, &rev).is_ok());
  std::string reply;
  const Status s =
      store_->post("/v3/kv/compaction",
                   "{\"revision\":\"" + std::to_string(rev) + "\",\"physical\":true}", &reply);
  ASSERT_TRUE(s.is_ok()) << s.message();

  std::unique_ptr<Watch> w;
  ASSERT_TRUE(store_->watch("compact/", first, &w).is_ok());
  std::vector<WatchEvent> events;
  Status n = w->next(&events, milliseconds(5000));
  EXPECT_EQ(n.code(), Code::kCompacted) << n.message();
  EXPECT_TRUE(events.empty());
  // From the compaction revision on, history is still there.
  ASSERT_TRUE(store_->watch("compact/", rev, &w).is_ok());
  events = collect(w.get(), 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kv.value, "2");
}

TEST_F(EtcdStoreTest, WatchReportsPutsAndDeletesUnderThePrefixInOrder) {
  int64_t r1 = 0, r2 = 0, r3 = 0, other = 0;
  ASSERT_TRUE(store_->put("watch/a", "1", 0, &r1).is_ok());
  std::unique_ptr<Watch> from_now;
  ASSERT_TRUE(store_->watch("watch/", 0, &from_now).is_ok());
  ASSERT_TRUE(store_->put("watchers/x", "not under watch/", 0, &other).is_ok());
  ASSERT_TRUE(store_->put("watch/b", "2", 0, &r2).is_ok());
  bool deleted = false;
  ASSERT_TRUE(store_->del("watch/a", &deleted, &r3).is_ok());
  EXPECT_TRUE(deleted);

  const std::vector<WatchEvent> events = collect(from_now.get(), 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[0].kv.key, "watch/b");
  EXPECT_EQ(events[0].kv.value, "2");
  EXPECT_EQ(events[0].kv.mod_revision, r2);
  EXPECT_EQ(events[0].kv.create_revision, r2);
  EXPECT_EQ(events[0].kv.version, 1);
  EXPECT_EQ(events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[1].kv.key, "watch/a");
  EXPECT_EQ(events[1].kv.mod_revision, r3);

  // From a past revision: the history since then, first change first.
  std::unique_ptr<Watch> replay;
  ASSERT_TRUE(store_->watch("watch/", r1, &replay).is_ok());
  const std::vector<WatchEvent> past = collect(replay.get(), 3);
  ASSERT_EQ(past.size(), 3u);
  EXPECT_EQ(past[0].kv.mod_revision, r1);
  EXPECT_EQ(past[1].kv.mod_revision, r2);
  EXPECT_EQ(past[2].kv.mod_revision, r3);
}

TEST_F(EtcdStoreTest, BinaryKeysAndAllFfPrefixesRangeInKeyOrder) {
  const std::string p = std::string("bin\xff", 4);
  const std::vector<std::string> keys = {p + std::string("\0", 1), p + "a", p + "\xff",
                                         p + "\xff\xff", std::string("bin\xff\0z", 6)};
  int64_t rev = 0;
  for (const std::string& k : keys)
    ASSERT_TRUE(store_->put(k, k + std::string(1, '\0'), 0, &rev).is_ok());
  ASSERT_TRUE(store_->put("bio", "past the prefix", 0, &rev).is_ok());

  std::vector<KeyValue> kvs;
  int64_t at = 0;
  ASSERT_TRUE(store_->range(p, &kvs, &at).is_ok());
  EXPECT_GE(at, rev);
  std::vector<std::string> got;
  for (const KeyValue& kv : kvs) {
    got.push_back(kv.key);
    EXPECT_EQ(kv.value, kv.key + std::string(1, '\0'));
  }
  std::vector<std::string> want = keys;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);

  // "\xff\xff" has no successor: the range runs to the end of the key space.
  ASSERT_TRUE(store_->range(p + "\xff", &kvs, &at).is_ok());
  ASSERT_EQ(kvs.size(), 2u);
  EXPECT_EQ(kvs[0].key, p + "\xff");
  EXPECT_EQ(kvs[1].key, p + "\xff\xff");

  // The empty prefix is every key.
  ASSERT_TRUE(store_->range("", &kvs, &at).is_ok());
  EXPECT_GE(kvs.size(), keys.size() + 1);
  for (size_t i = 1; i < kvs.size(); ++i) EXPECT_LT(kvs[i - 1].key, kvs[i].key);
}

TEST_F(EtcdStoreTest, ComparisonsFollowEtcd) {
  int64_t rev = 0, put_rev = 0;
  bool ok = true;
  // A value comparison on an absent key fails even for the empty value.
  ASSERT_TRUE(
      store_->txn({Compare::value_is("cmp/absent", "")}, {TxnOp::put("cmp/x", "1")}, &ok, &rev)
          .is_ok());
  EXPECT_FALSE(ok);
  ASSERT_TRUE(store_->put("cmp/empty", "", 0, &put_rev).is_ok());
  ASSERT_TRUE(store_
                  ->txn({Compare::value_is("cmp/empty", ""), Compare::absent("cmp/x"),
                         Compare::mod_revision_is("cmp/empty", put_rev)},
                        {TxnOp::put("cmp/x", "1"), TxnOp::del("cmp/empty")}, &ok, &rev)
                  .is_ok());
  EXPECT_TRUE(ok);
  EXPECT_EQ(rev, put_rev + 1);
  KeyValue kv;
  ASSERT_TRUE(store_->get("cmp/x", &kv).is_ok());
  EXPECT_EQ(kv.mod_revision, rev);
  EXPECT_EQ(store_->get("cmp/empty", &kv).code(), Code::kNotFound);
}

TEST_F(EtcdStoreTest, DestroyingAnIdleWatchIsPrompt) {
  std::unique_ptr<Watch> w;
  ASSERT_TRUE(store_->watch("idle/", 0, &w).is_ok());
  std::vector<WatchEvent> events;
  EXPECT_TRUE(w->next(&events, milliseconds(50)).is_ok());
  EXPECT_TRUE(events.empty());
  const auto t0 = std::chrono::steady_clock::now();
  w.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(500));
}

TEST(EtcdStoreRestartTest, UnavailableWhileEtcdIsDownAndServingAgainAfterRestart) {
  if (!EtcdProcess::available()) GTEST_SKIP() << EtcdProcess::kMissing;
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok());
  std::unique_ptr<KvStore> store;
  ASSERT_TRUE(open_etcd_store(etcd.base_url(), &store).is_ok());
  int64_t rev = 0;
  ASSERT_TRUE(store->put("k", "v", 0, &rev).is_ok());
  std::unique_ptr<Watch> w;
  ASSERT_TRUE(store->watch("k", 0, &w).is_ok());

  etcd.kill_hard();
  KeyValue kv;
  EXPECT_EQ(store->get("k", &kv).code(), Code::kUnavailable);
  std::vector<WatchEvent> events;
  EXPECT_EQ(w->next(&events, milliseconds(5000)).code(), Code::kUnavailable);

  etcd.restart();
  ASSERT_TRUE(etcd.ok());
  const Status s = store->get("k", &kv);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(kv.value, "v");
  EXPECT_EQ(kv.mod_revision, rev);
}

}  // namespace
}  // namespace wharf::control
