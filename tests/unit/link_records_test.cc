// The record layer of encrypted links (links/link_records.h): what one direction seals the
// other opens, byte for byte; a record changed anywhere, replayed, reordered or reflected
// back fails its check; both ends move to the next key at the same record, and the key
// really changes; the two ends of a real TLS session derive matching, distinct directions.
#include "links/link_records.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "links/link_tls.h"
#include "support/test_certs.h"

namespace wharf::links {
namespace {

using Bytes = std::vector<uint8_t>;
using Direction = RecordCipher::Direction;

constexpr uint8_t kSecret[RecordCipher::kSecretSize] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
constexpr uint8_t kOtherSecret[RecordCipher::kSecretSize] = {9, 8, 7};

Bytes payload(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

Bytes seal(RecordCipher& c, const Bytes& plain) {
  Bytes record(plain.size() + RecordCipher::kOverhead);
  EXPECT_TRUE(c.seal(plain.data(), plain.size(), record.data()));
  return record;
}

// The payload of `record` if it opens, else nothing.
std::optional<Bytes> open(RecordCipher& c, const Bytes& record) {
  Bytes plain(RecordCipher::payload_size(record.data()));
  if (!c.open(record.data(), plain.data())) return std::nullopt;
  return plain;
}

struct Ends {
  std::unique_ptr<RecordCipher> sealer = RecordCipher::make(kSecret, Direction::kSeal);
  std::unique_ptr<RecordCipher> opener = RecordCipher::make(kSecret, Direction::kOpen);
};

TEST(LinkRecordsTest, WhatOneEndSealsTheOtherOpensAndTheRecordHidesIt) {
  Ends e;
  for (const size_t n : {size_t{1}, size_t{100}, size_t{4096}, RecordCipher::kMaxPayload}) {
    const Bytes plain = payload(n, static_cast<uint8_t>(n));
    const Bytes record = seal(*e.sealer, plain);
    EXPECT_EQ(RecordCipher::payload_size(record.data()), n);
    // The payload's bytes are not on the wire: no 16-byte run of them appears in the record.
    if (n >= 16) {
      const Bytes run(plain.begin(), plain.begin() + 16);
      EXPECT_EQ(std::search(record.begin(), record.end(), run.begin(), run.end()), record.end());
    }
    EXPECT_EQ(open(*e.opener, record), plain) << n;
  }
}

TEST(LinkRecordsTest, ARecordChangedAnywhereFailsItsCheck) {
  const Bytes plain = payload(1000, 3);
  const size_t size = plain.size() + RecordCipher::kOverhead;
  // A byte of the length, of the body and of the tag.
  for (const size_t at : {size_t{3}, size_t{RecordCipher::kHeaderSize + 500}, size - 1}) {
    Ends e;
    Bytes record = seal(*e.sealer, plain);
    record[at] ^= 0x01;
    if (RecordCipher::payload_size(record.data()) != plain.size()) record.resize(size + 1);
    EXPECT_FALSE(open(*e.opener, record)) << at;
  }
}

TEST(LinkRecordsTest, AReplayedOrReorderedRecordFailsItsCheck) {
  {
    Ends e;
    const Bytes first = seal(*e.sealer, payload(10, 1));
    ASSERT_TRUE(open(*e.opener, first));
    EXPECT_FALSE(open(*e.opener, first));  // the same record again
  }
  {
    Ends e;
    seal(*e.sealer, payload(10, 1));
    const Bytes second = seal(*e.sealer, payload(10, 2));
    EXPECT_FALSE(open(*e.opener, second));  // before the first
  }
}

TEST(LinkRecordsTest, AnotherSecretOpensNothing) {
  Ends e;
  auto other = RecordCipher::make(kOtherSecret, Direction::kOpen);
  EXPECT_FALSE(open(*other, seal(*e.sealer, payload(64, 5))));
}

TEST(LinkRecordsTest, LengthsOutOfRangeAreRefused) {
  const uint8_t empty[4] = {0, 0, 0, 0};
  const uint8_t too_long[4] = {0, 1, 0, 1};  // kMaxPayload + 1
  const uint8_t largest[4] = {0, 1, 0, 0};
  EXPECT_EQ(RecordCipher::payload_size(empty), 0u);
  EXPECT_EQ(RecordCipher::payload_size(too_long), 0u);
  EXPECT_EQ(RecordCipher::payload_size(largest), RecordCipher::kMaxPayload);
}

// Every 3 records here: the ends stay in step across many key changes, and an opener that
// kept the first key fails at the first record of the second, so the key does change.
TEST(LinkRecordsTest, BothEndsMoveToTheNextKeyAtTheSameRecord) {
  auto sealer = RecordCipher::make(kSecret, Direction::kSeal, 3);
  auto opener = RecordCipher::make(kSecret, Direction::kOpen, 3);
  auto stuck = RecordCipher::make(kSecret, Direction::kOpen, 1000);
  for (int i = 0; i < 10; ++i) {
    const Bytes plain = payload(32, static_cast<uint8_t>(i));
    const Bytes record = seal(*sealer, plain);
    EXPECT_EQ(open(*opener, record), plain) << i;
    EXPECT_EQ(open(*stuck, record).has_value(), i < 3) << i;
  }
}

// A TLS 1.3 session between two hosts of one CA over a socket pair, handshaken.
struct Session {
  test_support::TestCerts certs;
  std::unique_ptr<LinkTls> a_tls;
  std::unique_ptr<LinkTls> b_tls;
  UniqueFd a_fd;
  UniqueFd b_fd;
  LinkTls::Session a;
  LinkTls::Session b;

  Session() {
    std::string why;
    const auto ha = certs.host("a");
    const auto hb = certs.host("b");
    a_tls = LinkTls::load(certs.ca(), ha.cert, ha.key, "a", true, &why);
    b_tls = LinkTls::load(certs.ca(), hb.cert, hb.key, "b", true, &why);
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    a_fd.reset(fds[0]);
    b_fd.reset(fds[1]);
    a = a_tls->start(a_fd.get(), true);
    b = b_tls->start(b_fd.get(), false);
    bool a_done = false;
    bool b_done = false;
    for (int i = 0; i < 100 && !(a_done && b_done); ++i) {
      if (!a_done) a_done = LinkTls::handshake(a.get(), &why) == LinkTls::Step::kDone;
      if (!b_done) b_done = LinkTls::handshake(b.get(), &why) == LinkTls::Step::kDone;
    }
    EXPECT_TRUE(a_done && b_done) << why;
  }
};

TEST(LinkRecordsTest, TheEndsOfASessionDeriveMatchingDirectionsThatDiffer) {
  Session s;
  RecordCipher::Pair dialler;
  RecordCipher::Pair acceptor;
  std::string why;
  ASSERT_TRUE(RecordCipher::from_session(s.a.get(), true, &dialler, &why)) << why;
  ASSERT_TRUE(RecordCipher::from_session(s.b.get(), false, &acceptor, &why)) << why;
  const Bytes there = payload(300, 1);
  const Bytes back = payload(300, 2);
  EXPECT_EQ(open(*acceptor.open, seal(*dialler.seal, there)), there);
  EXPECT_EQ(open(*dialler.open, seal(*acceptor.seal, back)), back);
  // A record reflected to the end that sealed it does not open there.
  RecordCipher::Pair again;
  ASSERT_TRUE(RecordCipher::from_session(s.a.get(), true, &again, &why));
  EXPECT_FALSE(open(*again.open, seal(*again.seal, there)));
}

}  // namespace
}  // namespace wharf::links
