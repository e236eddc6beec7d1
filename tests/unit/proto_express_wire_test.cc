// Express line frames and the routers' Hello (proto/express_wire.h): sizes, round trips,
// splitting a stream into frames, and rejection of what no peer may send.
#include <gtest/gtest.h>

#include <vector>

#include "proto/express_wire.h"

namespace wharf::proto::express {
namespace {

std::vector<uint8_t> wire(const Frame& f, size_t payload = 0) {
  std::vector<uint8_t> out(kFrameSize + payload, 0xab);
  encode_frame(f, out.data());
  return out;
}

Frame message(uint32_t seq, uint32_t len) {
  Frame f;
  f.kind = kMessage;
  f.flags = kWithImm | kSolicited;
  f.epoch = 3;
  f.seq = seq;
  f.ack = seq - 1;
  f.imm = 0xdeadbeef;
  f.length = len;
  return f;
}

TEST(ExpressWireTest, SizesAreFixed) {
  uint8_t buf[64];
  EXPECT_EQ(encode(Hello{}, buf, sizeof(buf)), kHelloSize);
  EXPECT_EQ(encode(Frame{}, buf, sizeof(buf)), kFrameSize);
}

TEST(ExpressWireTest, AFrameRoundTripsLittleEndian) {
  const std::vector<uint8_t> w = wire(message(0x01020304, 5), 5);
  EXPECT_EQ(w[0], kMessage);
  EXPECT_EQ(w[4], 0x04);  // seq, low byte first
  Frame f;
  ASSERT_TRUE(decode_frame(w.data(), &f));
  EXPECT_EQ(f.seq, 0x01020304u);
  EXPECT_EQ(f.ack, 0x01020303u);
  EXPECT_EQ(f.imm, 0xdeadbeefu);
  EXPECT_EQ(f.length, 5u);
  EXPECT_EQ(f.epoch, 3);
}

TEST(ExpressWireTest, AStreamSplitsAtHeadersAndAsksForMoreOfACutHeader) {
  std::vector<uint8_t> stream = wire(message(1, 100), 100);
  Frame ready;
  ready.kind = kReady;
  const std::vector<uint8_t> r = wire(ready);
  stream.insert(stream.end(), r.begin(), r.end());
  Frame f;
  ASSERT_EQ(next_header(stream.data(), stream.size(), &f), Next::kFrame);
  EXPECT_EQ(f.length, 100u);
  // The payload need not be there yet: the receiver places it as it arrives.
  EXPECT_EQ(next_header(stream.data(), kFrameSize, &f), Next::kFrame);
  const size_t next = kFrameSize + f.length;
  ASSERT_EQ(next_header(stream.data() + next, stream.size() - next, &f), Next::kFrame);
  EXPECT_EQ(f.kind, kReady);
  for (size_t cut : {size_t{0}, size_t{1}, kFrameSize - 1})
    EXPECT_EQ(next_header(stream.data(), cut, &f), Next::kNeedMore) << cut;
}

TEST(ExpressWireTest, WhatNoPeerMaySendIsRejected) {
  Frame f;
  Frame unknown;
  unknown.kind = 9;
  EXPECT_EQ(next_header(wire(unknown).data(), kFrameSize, &f), Next::kBad);
  Frame ack_with_payload;
  ack_with_payload.kind = kAck;
  ack_with_payload.length = 1;
  EXPECT_EQ(next_header(wire(ack_with_payload, 1).data(), kFrameSize, &f), Next::kBad);
  const Frame too_long = message(1, kMaxMessage + 1);
  EXPECT_EQ(next_header(wire(too_long).data(), kFrameSize, &f), Next::kBad);
  Frame odd_flags = message(1, 0);
  odd_flags.flags = 0x80;
  EXPECT_EQ(next_header(wire(odd_flags).data(), kFrameSize, &f), Next::kBad);
  Frame refuse_with_flags;
  refuse_with_flags.kind = kRefuse;
  refuse_with_flags.flags = kSolicited;
  EXPECT_EQ(next_header(wire(refuse_with_flags).data(), kFrameSize, &f), Next::kBad);
}

TEST(ExpressWireTest, AHelloNeedsOurMagicAndVersion) {
  uint8_t buf[kHelloSize];
  Hello h;
  h.src_host = 2;
  h.src_qpn = 0x101;
  h.dst_qpn = 0x202;
  ASSERT_EQ(encode(h, buf, sizeof(buf)), kHelloSize);
  Hello out;
  ASSERT_TRUE(decode_hello(buf, &out));
  EXPECT_EQ(out.src_host, 2);
  EXPECT_EQ(out.dst_qpn, 0x202u);
  h.version = kVersion + 1;
  encode(h, buf, sizeof(buf));
  EXPECT_FALSE(decode_hello(buf, &out));
  h = Hello{};
  h.magic = 0x50544857;  // a host link's Hello
  encode(h, buf, sizeof(buf));
  EXPECT_FALSE(decode_hello(buf, &out));
}

}  // namespace
}  // namespace wharf::proto::express
