// Tests for proto/codec.h over every message of proto/messages.h: sizes, field order and
// little-endian byte layout, round trips, and rejection of truncated or over-long input.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "proto/codec.h"
#include "proto/messages.h"
#include "proto_message_types.h"

namespace wharf::proto {
namespace {

using test_support::Spec;

// Sets every integer field, in visit order, to the next bytes of a counter starting at
// `first`: the little-endian encoding of a filled message is then first, first+1, ...
struct CountingFiller {
  uint8_t next;
  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_integral_v<T>) {
      std::make_unsigned_t<T> u = 0;
      for (size_t i = 0; i < sizeof(T); ++i) {
        u = static_cast<decltype(u)>(u | (static_cast<decltype(u)>(next++) << (8 * i)));
      }
      v = static_cast<T>(u);
    } else if constexpr (std::is_array_v<T> || requires { std::tuple_size<T>::value; }) {
      for (auto& e : v) (*this)(e);
    } else {
      v.visit(*this);
    }
  }
};

// Sets every integer field from a deterministic pseudo-random sequence.
struct RandomFiller {
  uint64_t state;
  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_integral_v<T>) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      v = static_cast<T>(state);
    } else if constexpr (std::is_array_v<T> || requires { std::tuple_size<T>::value; }) {
      for (auto& e : v) (*this)(e);
    } else {
      v.visit(*this);
    }
  }
};

// Every integer field's value, in visit order; compares messages without using the codec.
struct Collector {
  std::vector<uint64_t> values;
  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_integral_v<T>) {
      values.push_back(static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v)));
    } else if constexpr (std::is_array_v<T> || requires { std::tuple_size<T>::value; }) {
      for (auto& e : v) (*this)(e);
    } else {
      v.visit(*this);
    }
  }
};

template <class T>
std::vector<uint64_t> fields_of(T msg) {
  Collector c;
  c(msg);
  return c.values;
}

template <class T>
T counting(uint8_t first) {
  T msg{};
  CountingFiller f{first};
  f(msg);
  return msg;
}

template <class T>
std::vector<uint8_t> encoded(const T& msg) {
  std::vector<uint8_t> buf(kMaxMessage);
  size_t n = encode(msg, buf.data(), buf.size());
  buf.resize(n);
  return buf;
}

// ---- Properties of every message type ----
// One test per property, over every message type: a failure names the type.

template <class Check>
void for_every_message(Check&& check) {
  test_support::for_each_type(test_support::AllMessages{}, [&]<class T>() {
    SCOPED_TRACE(Spec<T>::kName);
    check.template operator()<T>();
  });
}

TEST(EveryMessageTest, EncodesToItsDocumentedSize) {
  for_every_message([]<class T>() {
    EXPECT_EQ(encoded(counting<T>(1)).size(), Spec<T>::kSize);
    EXPECT_EQ(encoded(T{}).size(), Spec<T>::kSize);
  });
}

TEST(EveryMessageTest, EncodesFieldsInOrderLittleEndianWithoutPadding) {
  for_every_message([]<class T>() {
    std::vector<uint8_t> bytes = encoded(counting<T>(1));
    for (size_t i = 0; i < bytes.size(); ++i)
      ASSERT_EQ(bytes[i], static_cast<uint8_t>(i + 1)) << "byte " << i;  // wraps past 255
  });
}

TEST(EveryMessageTest, RoundTripPreservesEveryField) {
  for_every_message([]<class T>() {
    std::vector<T> samples = {counting<T>(1), counting<T>(0x80)};
    for (uint64_t seed : {1ull, 0x9e3779b97f4a7c15ull, 0xdeadbeefull}) {
      T m{};
      RandomFiller f{seed};
      f(m);
      samples.push_back(m);
    }
    for (const T& in : samples) {
      std::vector<uint8_t> bytes = encoded(in);
      ASSERT_EQ(bytes.size(), Spec<T>::kSize);
      T out{};
      ASSERT_TRUE(decode(bytes.data(), bytes.size(), &out));
      EXPECT_EQ(fields_of(out), fields_of(in));
      EXPECT_EQ(encoded(out), bytes);
    }
  });
}

TEST(EveryMessageTest, DecodeOverwritesEveryField) {
  for_every_message([]<class T>() {
    std::vector<uint8_t> zeros(Spec<T>::kSize, 0);
    T out = counting<T>(1);
    ASSERT_TRUE(decode(zeros.data(), zeros.size(), &out));
    for (uint64_t v : fields_of(out)) EXPECT_EQ(v, 0u);
  });
}

TEST(EveryMessageTest, DecodeRejectsTruncationAtEveryLength) {
  for_every_message([]<class T>() {
    std::vector<uint8_t> bytes = encoded(counting<T>(1));
    for (size_t len = 0; len < bytes.size(); ++len) {
      T out{};
      EXPECT_FALSE(decode(bytes.data(), len, &out)) << "length " << len;
    }
  });
}

TEST(EveryMessageTest, DecodeRejectsTrailingBytes) {
  for_every_message([]<class T>() {
    std::vector<uint8_t> bytes = encoded(counting<T>(1));
    for (size_t extra = 1; extra <= 16; ++extra) {
      bytes.push_back(0);
      T out{};
      EXPECT_FALSE(decode(bytes.data(), bytes.size(), &out)) << "extra " << extra;
    }
  });
}

TEST(EveryMessageTest, EncodeIntoShortBufferFailsAndStaysInsideIt) {
  for_every_message([]<class T>() {
    const T msg = counting<T>(1);
    constexpr uint8_t kGuard = 0xa5;
    for (size_t cap = 0; cap < Spec<T>::kSize; ++cap) {
      std::vector<uint8_t> buf(cap + 32, kGuard);
      EXPECT_EQ(encode(msg, buf.data(), cap), 0u) << "cap " << cap;
      for (size_t i = cap; i < buf.size(); ++i) ASSERT_EQ(buf[i], kGuard) << cap << "/" << i;
    }
  });
}

TEST(EveryMessageTest, FitsInOneDatagramAfterTheHeader) {
  for_every_message([]<class T>() { EXPECT_LE(kHeaderSize + Spec<T>::kSize, kMaxMessage); });
}

// ---- Constants that name sizes ----

TEST(CodecConstantsTest, NamedSizesMatchTheEncoding) {
  EXPECT_EQ(encoded(Header{}).size(), kHeaderSize);
  EXPECT_EQ(encoded(AsyncEventMsg{}).size(), kAsyncEventSize);
  EXPECT_EQ(encoded(CqEventMsg{}).size(), kCqEventSize);
}

TEST(CodecConstantsTest, DefaultHeaderCarriesMagicAndVersion) {
  Header h;
  EXPECT_EQ(h.magic, kMagic);
  EXPECT_EQ(h.version, kVersion);
  EXPECT_EQ(h.status, 0u);
}

// ---- Golden bytes ----

TEST(CodecGoldenTest, ReplyHeaderBytes) {
  Header h;
  h.op = static_cast<uint16_t>(Op::kCreateQp) | kReplyBit;
  h.seq = 0x0a0b0c0d;
  h.status = 12;  // ENOMEM
  const std::vector<uint8_t> expected = {
      'W',  'H',  'R',  'F',   // magic 0x46524857
      0x0d, 0x00,              // version 13
      0x0a, 0x80,              // op 10 | reply bit
      0x0d, 0x0c, 0x0b, 0x0a,  // seq
      0x0c, 0x00, 0x00, 0x00,  // status
  };
  EXPECT_EQ(encoded(h), expected);
  Header back;
  back.magic = 0;
  ASSERT_TRUE(decode(expected.data(), expected.size(), &back));
  EXPECT_EQ(back.magic, kMagic);
  EXPECT_EQ(back.op, 0x800a);
  EXPECT_EQ(back.seq, 0x0a0b0c0du);
  EXPECT_EQ(back.status, 12u);
}

TEST(CodecGoldenTest, RegMrRequestBytes) {
  RegMrReq r;
  r.pd = 0x11;
  r.access = 0x0f;
  r.addr = 0x00007f0012345678;
  r.length = 0x10000;
  r.iova = 0x1122334455667788;
  r.mapped_start = 0x00007f0012346000;
  r.mapped_len = 0xf000;
  r.memfd_offset = 0x2000;
  const std::vector<uint8_t> expected = {
      0x11, 0x00, 0x00, 0x00,                          // pd
      0x0f, 0x00, 0x00, 0x00,                          // access
      0x78, 0x56, 0x34, 0x12, 0x00, 0x7f, 0x00, 0x00,  // addr
      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,  // length
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // iova
      0x00, 0x60, 0x34, 0x12, 0x00, 0x7f, 0x00, 0x00,  // mapped_start
      0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // mapped_len
      0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // memfd_offset
  };
  EXPECT_EQ(encoded(r), expected);
  RegMrReq back;
  ASSERT_TRUE(decode(expected.data(), expected.size(), &back));
  EXPECT_EQ(fields_of(back), fields_of(r));
}

TEST(CodecGoldenTest, CreateAhRequestBytesWithNestedAttrAndGid) {
  CreateAhReq r;
  r.pd = 3;
  r.attr.dlid = 0x1234;
  r.attr.sl = 1;
  r.attr.src_path_bits = 2;
  r.attr.static_rate = 3;
  r.attr.is_global = 1;
  r.attr.port_num = 1;
  r.attr.sgid_index = 0;
  r.attr.hop_limit = 64;
  r.attr.traffic_class = 0x20;
  r.attr.flow_label = 0x000abcde;
  r.attr.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7};  // ::ffff:10.0.0.7
  const std::vector<uint8_t> expected = {
      0x03, 0x00, 0x00, 0x00,                          // pd
      0x34, 0x12,                                      // dlid
      0x01, 0x02, 0x03, 0x01, 0x01, 0x00, 0x40, 0x20,  // sl .. traffic_class
      0xde, 0xbc, 0x0a, 0x00,                          // flow_label
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // dgid, in network order as given
      0x00, 0x00, 0xff, 0xff, 0x0a, 0x00, 0x00, 0x07,
  };
  EXPECT_EQ(encoded(r), expected);
}

TEST(CodecGoldenTest, RegisterContainerRequestBytesWithNameArray) {
  RegisterContainerReq r;
  const char name[] = "web-1";
  std::memcpy(r.name.data(), name, sizeof(name) - 1);
  r.vip = 0x0a000007;  // 10.0.0.7, host order
  const char tenant[] = "red";
  std::memcpy(r.tenant.data(), tenant, sizeof(tenant) - 1);
  const char network[] = "n1";
  std::memcpy(r.network.data(), network, sizeof(network) - 1);
  r.lid = 0x0402;
  std::vector<uint8_t> expected(102, 0);
  std::memcpy(expected.data(), name, sizeof(name) - 1);
  expected[32] = 0x07;
  expected[35] = 0x0a;
  std::memcpy(expected.data() + 36, tenant, sizeof(tenant) - 1);
  std::memcpy(expected.data() + 68, network, sizeof(network) - 1);
  expected[100] = 0x02;
  expected[101] = 0x04;
  EXPECT_EQ(encoded(r), expected);
}

TEST(CodecGoldenTest, AsyncEventBytes) {
  AsyncEventMsg e;
  e.event_type = 1;  // IBV_EVENT_QP_FATAL
  e.handle = 0x2a;
  EXPECT_EQ(encoded(e), (std::vector<uint8_t>{0x01, 0, 0, 0, 0x2a, 0, 0, 0}));
}

// ---- The building blocks, directly ----

TEST(CodecReaderTest, FailsOnceAndStaysFailed) {
  const uint8_t bytes[3] = {1, 2, 3};
  Reader r(bytes, sizeof(bytes));
  uint16_t a = 0;
  uint32_t b = 0;
  uint8_t c = 0;
  r(a);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(a, 0x0201);
  r(b);  // needs 4, 1 left
  EXPECT_FALSE(r.ok());
  r(c);  // a byte is left, but the reader has already failed
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.done());
}

TEST(CodecWriterTest, FailsOnceAndStaysFailed) {
  uint8_t buf[3] = {};
  Writer w(buf, sizeof(buf));
  w(uint16_t{0x0201});
  w(uint32_t{0});  // does not fit
  w(uint8_t{9});   // would fit, but the writer has already failed
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(buf[2], 0);
}

TEST(CodecWriterTest, SignedCharsAndWideValuesAreTruncatedToTheirWidth) {
  RegisterContainerReq r;
  r.name[0] = static_cast<char>(-1);
  r.name[31] = static_cast<char>(0x80);
  std::vector<uint8_t> bytes = encoded(r);
  ASSERT_EQ(bytes.size(), 102u);
  EXPECT_EQ(bytes[0], 0xff);
  EXPECT_EQ(bytes[31], 0x80);
  RegisterContainerReq back;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &back));
  EXPECT_EQ(back.name[0], static_cast<char>(-1));
  EXPECT_EQ(back.name[31], static_cast<char>(0x80));
}

}  // namespace
}  // namespace wharf::proto
