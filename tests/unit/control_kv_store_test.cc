// The KvStore contract (control/kv_store.h), one set of tests run against both backends:
// SQLite on a temporary file and a real etcd started on loopback (support/etcd_process.h).
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/kv_store.h"
#include "support/store_backend.h"

namespace wharf::control {
namespace {

using Code = Status::Code;
using namespace std::chrono_literals;

class KvStoreTest : public test_support::StoreBackendTest {
 protected:
  int64_t put(const std::string& k, const std::string& v, int64_t lease = 0) {
    int64_t rev = 0;
    Status st = store_->put(k, v, lease, &rev);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return rev;
  }
  Code get(const std::string& k, KeyValue* kv) { return store_->get(k, kv).code(); }
  bool absent(const std::string& k) {
    KeyValue kv;
    return get(k, &kv) == Code::kNotFound;
  }
};

TEST_P(KvStoreTest, PutThenGetCarriesValueVersionAndRevisions) {
  const int64_t r1 = put("a", "one");
  const int64_t r2 = put("a", "two");
  EXPECT_EQ(r2, r1 + 1);
  KeyValue kv;
  ASSERT_EQ(get("a", &kv), Code::kOk);
  EXPECT_EQ(kv.value, "two");
  EXPECT_EQ(kv.create_revision, r1);
  EXPECT_EQ(kv.mod_revision, r2);
  EXPECT_EQ(kv.version, 2);
  EXPECT_EQ(kv.lease, 0);
  EXPECT_EQ(get("b", &kv), Code::kNotFound);
}

TEST_P(KvStoreTest, KeysAndValuesAreBytes) {
  const std::string key("k\0\xff\x01", 4);
  const std::string value("\0\x80v\xff", 4);
  put(key, value);
  KeyValue kv;
  ASSERT_EQ(get(key, &kv), Code::kOk);
  EXPECT_EQ(kv.key, key);
  EXPECT_EQ(kv.value, value);
}

TEST_P(KvStoreTest, RangeReturnsThePrefixInKeyOrderAtARevision) {
  put("/b/2", "x");
  put("/a/1", "x");
  put("/b/1", "y");
  const int64_t last = put("/c", "z");
  put("/b", "not under /b/");
  std::vector<KeyValue> out;
  int64_t rev = 0;
  ASSERT_TRUE(store_->range("/b/", &out, &rev).is_ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "/b/1");
  EXPECT_EQ(out[0].value, "y");
  EXPECT_EQ(out[1].key, "/b/2");
  EXPECT_EQ(rev, last + 1);
  ASSERT_TRUE(store_->range("", &out, &rev).is_ok());
  EXPECT_EQ(out.size(), 5u);
  ASSERT_TRUE(store_->range("/nothing/", &out, &rev).is_ok());
  EXPECT_TRUE(out.empty());
}

TEST_P(KvStoreTest, DeleteBumpsTheRevisionOnlyWhenTheKeyExisted) {
  const int64_t r1 = put("k", "v");
  bool deleted = false;
  int64_t rev = 0;
  ASSERT_TRUE(store_->del("k", &deleted, &rev).is_ok());
  EXPECT_TRUE(deleted);
  EXPECT_EQ(rev, r1 + 1);
  EXPECT_TRUE(absent("k"));
  ASSERT_TRUE(store_->del("k", &deleted, &rev).is_ok());
  EXPECT_FALSE(deleted);
  EXPECT_EQ(rev, r1 + 1);
  // A key created again starts over.
  const int64_t r3 = put("k", "w");
  KeyValue kv;
  ASSERT_EQ(get("k", &kv), Code::kOk);
  EXPECT_EQ(kv.create_revision, r3);
  EXPECT_EQ(kv.version, 1);
}

TEST_P(KvStoreTest, TransactionsCompareAndSetAtomically) {
  bool ok = false;
  int64_t rev = 0;
  ASSERT_TRUE(store_
                  ->txn({Compare::absent("ip/1")}, {TxnOp::put("ip/1", "c1"), TxnOp::put("n", "1")},
                        &ok, &rev)
                  .is_ok());
  EXPECT_TRUE(ok);
  KeyValue kv;
  ASSERT_EQ(get("ip/1", &kv), Code::kOk);
  EXPECT_EQ(kv.mod_revision, rev);
  ASSERT_EQ(get("n", &kv), Code::kOk);
  EXPECT_EQ(kv.mod_revision, rev);  // one revision for the whole transaction

  // The address is taken: the second claim changes nothing.
  int64_t rev2 = 0;
  ASSERT_TRUE(
      store_->txn({Compare::absent("ip/1")}, {TxnOp::put("ip/1", "c2")}, &ok, &rev2).is_ok());
  EXPECT_FALSE(ok);
  EXPECT_EQ(rev2, rev);
  ASSERT_EQ(get("ip/1", &kv), Code::kOk);
  EXPECT_EQ(kv.value, "c1");

  ASSERT_TRUE(store_
                  ->txn({Compare::mod_revision_is("ip/1", rev), Compare::value_is("n", "1")},
                        {TxnOp::put("n", "2"), TxnOp::del("ip/1")}, &ok, &rev2)
                  .is_ok());
  EXPECT_TRUE(ok);
  EXPECT_TRUE(absent("ip/1"));
  ASSERT_TRUE(
      store_->txn({Compare::value_is("ip/1", "")}, {TxnOp::put("x", "1")}, &ok, &rev2).is_ok());
  EXPECT_FALSE(ok) << "a value comparison on an absent key must not hold";
  EXPECT_EQ(store_->txn({}, {TxnOp::put("d", "1"), TxnOp::del("d")}, &ok, &rev2).code(),
            Code::kInvalidArgument);
}

// IPAM's invariant: claims racing through compare-and-set never hand out one address twice.
TEST_P(KvStoreTest, RacingClaimsNeverTakeOneAddressTwice) {
  constexpr int kThreads = 4;
  constexpr int kEach = 15;
  std::vector<std::vector<int>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < kEach; ++n) {
        for (int ip = 1; ip < 256; ++ip) {  // the lowest free address
          bool ok = false;
          int64_t rev = 0;
          const std::string key = "ip/" + std::to_string(ip);
          if (!store_->txn({Compare::absent(key)}, {TxnOp::put(key, std::to_string(t))}, &ok, &rev)
                   .is_ok())
            return;
          if (ok) {
            got[static_cast<size_t>(t)].push_back(ip);
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int> all;
  size_t total = 0;
  for (const auto& g : got) {
    total += g.size();
    all.insert(g.begin(), g.end());
  }
  EXPECT_EQ(total, size_t{kThreads * kEach});
  EXPECT_EQ(all.size(), total);
  EXPECT_EQ(*all.rbegin(), kThreads * kEach);  // dense: 1..60
}

TEST_P(KvStoreTest, KeysOnALeaseGoWhenItIsRevokedOrExpires) {
  int64_t lease = 0;
  ASSERT_TRUE(store_->grant_lease(60, &lease).is_ok());
  EXPECT_NE(lease, 0);
  put("host/h1", "up", lease);
  KeyValue kv;
  ASSERT_EQ(get("host/h1", &kv), Code::kOk);
  EXPECT_EQ(kv.lease, lease);
  EXPECT_TRUE(store_->keep_alive(lease).is_ok());
  ASSERT_TRUE(store_->revoke_lease(lease).is_ok());
  EXPECT_TRUE(absent("host/h1"));
  EXPECT_EQ(store_->keep_alive(lease).code(), Code::kNotFound);
  int64_t rev = 0;
  EXPECT_EQ(store_->put("host/h1", "up", lease, &rev).code(), Code::kNotFound);

  ASSERT_TRUE(store_->grant_lease(2, &lease).is_ok());
  put("host/h2", "up", lease);
  put("host/h3", "up");
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (!absent("host/h2") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(absent("host/h2")) << "the lease did not expire";
  EXPECT_FALSE(absent("host/h3"));
  EXPECT_EQ(store_->keep_alive(lease).code(), Code::kNotFound);
}

TEST_P(KvStoreTest, AWatchReportsEveryChangeUnderItsPrefixInOrder) {
  const int64_t first = put("/w/a", "1");
  put("/x/other", "1");
  put("/w/b", "2");
  std::unique_ptr<Watch> w;
  ASSERT_TRUE(store_->watch("/w/", first, &w).is_ok());
  std::vector<WatchEvent> ev;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       ev.size() < 2 && std::chrono::steady_clock::now() < deadline;)
    ASSERT_TRUE(w->next(&ev, 1000ms).is_ok());
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(ev[0].kv.key, "/w/a");
  EXPECT_EQ(ev[0].kv.mod_revision, first);
  EXPECT_EQ(ev[1].kv.key, "/w/b");
  EXPECT_EQ(ev[1].kv.value, "2");

  // Changes made while the watcher waits.
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    bool deleted = false;
    int64_t rev = 0;
    (void)store_->del("/w/a", &deleted, &rev);
    put("/w/b", "3");
  });
  ev.clear();
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       ev.size() < 2 && std::chrono::steady_clock::now() < deadline;)
    ASSERT_TRUE(w->next(&ev, 1000ms).is_ok());
  writer.join();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(ev[0].kv.key, "/w/a");
  EXPECT_EQ(ev[1].type, WatchEvent::Type::kPut);
  EXPECT_EQ(ev[1].kv.version, 2);
  EXPECT_EQ(ev[1].kv.mod_revision, ev[0].kv.mod_revision + 1);
}

TEST_P(KvStoreTest, AWatchFromNowSeesOnlyLaterChanges) {
  put("/w/old", "1");
  std::unique_ptr<Watch> w;
  ASSERT_TRUE(store_->watch("/w/", 0, &w).is_ok());
  std::vector<WatchEvent> ev;
  ASSERT_TRUE(w->next(&ev, 200ms).is_ok());
  EXPECT_TRUE(ev.empty());
  put("/w/new", "2");
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       ev.empty() && std::chrono::steady_clock::now() < deadline;)
    ASSERT_TRUE(w->next(&ev, 1000ms).is_ok());
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kv.key, "/w/new");
}

TEST_P(KvStoreTest, StateSurvivesARestart) {
  int64_t lease = 0;
  ASSERT_TRUE(store_->grant_lease(60, &lease).is_ok());
  put("t/a", "1");
  const int64_t rev = put("t/b", "2", lease);
  reopen();
  KeyValue kv;
  ASSERT_EQ(get("t/a", &kv), Code::kOk);
  EXPECT_EQ(kv.value, "1");
  ASSERT_EQ(get("t/b", &kv), Code::kOk);
  EXPECT_EQ(kv.mod_revision, rev);
  EXPECT_EQ(kv.lease, lease);
  EXPECT_TRUE(store_->keep_alive(lease).is_ok());
  EXPECT_EQ(put("t/c", "3"), rev + 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, KvStoreTest, ::testing::Values("sqlite", "etcd"),
                         test_support::backend_name);

TEST(PrefixEndTest, IsTheFirstKeyAfterThePrefixOrNone) {
  EXPECT_EQ(prefix_end("/a/"), "/a0");
  EXPECT_EQ(prefix_end(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(prefix_end(std::string("\x01\xfe", 2)), std::string("\x01\xff", 2));
  EXPECT_EQ(prefix_end(""), "");
  EXPECT_EQ(prefix_end(std::string("\xff\xff", 2)), "");
}

TEST(KvStoreUrlTest, AnUnknownSchemeIsRejected) {
  std::unique_ptr<KvStore> s;
  EXPECT_EQ(open_kv_store("redis://x", &s).code(), Code::kInvalidArgument);
  EXPECT_EQ(open_kv_store("sqlite:", &s).code(), Code::kInvalidArgument);
  EXPECT_EQ(open_kv_store("sqlite:/nonexistent-dir/x/state.db", &s).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace wharf::control
