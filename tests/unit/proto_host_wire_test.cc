// Host-to-host wire format (proto/host_wire.h): sizes, version negotiation, every opcode's
// round trip, streaming (partial input), and rejection of what this version does not accept.
#include <gtest/gtest.h>

#include <vector>

#include "proto/host_wire.h"

namespace wharf::proto::host {
namespace {

std::vector<uint8_t> wire(const Packet& p) {
  std::vector<uint8_t> out(kPacketHeaderSize + 200 + p.payload_len);
  size_t n = encode_headers(p, out.data(), out.size());
  EXPECT_NE(n, 0u);
  out.resize(n);
  out.insert(out.end(), p.payload, p.payload + p.payload_len);
  return out;
}

Packet make(uint8_t opcode, const std::vector<uint8_t>& payload, uint8_t flags = 0) {
  static std::vector<uint8_t> keep;
  keep = payload;
  Packet p;
  p.hdr.opcode = opcode;
  p.hdr.flags = flags;
  p.hdr.sl = 3;
  p.hdr.dlid = 0x401;
  p.hdr.slid = 0x2;
  p.hdr.dest_qpn = 0x123456;
  p.hdr.src_qpn = 0x100;
  p.hdr.psn = 0xfffffe;
  p.hdr.network = 0xa1b2c3d4;
  p.grh.ver_tc_flow = 0x6a012345;
  p.grh.hop_limit = 64;
  p.grh.sgid[15] = 1;
  p.grh.dgid[15] = 2;
  p.reth = Reth{0x7f0011223344, 0xabcd, 1u << 30};
  p.atomic.va = 0x1000;
  p.atomic.rkey = 9;
  p.atomic.swap_add = 5;
  p.atomic.compare = 6;
  p.imm = 0xdeadbeef;
  p.aeth.syndrome = aeth_rnr(12);
  p.aeth.msn = 77;
  p.atomic_orig = 0x1122334455667788;
  p.deth = Deth{0x11111111, 0x222};
  p.xrc_srqn = 0xabcdef;
  p.payload = keep.data();
  p.payload_len = static_cast<uint32_t>(keep.size());
  return p;
}

TEST(HostWireTest, FixedSizes) {
  uint8_t buf[128];
  EXPECT_EQ(encode(Hello{}, buf, sizeof(buf)), kHelloSize);
  EXPECT_EQ(encode(PacketHeader{}, buf, sizeof(buf)), kPacketHeaderSize);
  EXPECT_EQ(encode(Grh{}, buf, sizeof(buf)), 40u);
  EXPECT_EQ(encode(Reth{}, buf, sizeof(buf)), 16u);
  EXPECT_EQ(encode(AtomicEth{}, buf, sizeof(buf)), 32u);
  EXPECT_EQ(encode(Aeth{}, buf, sizeof(buf)), 8u);
  EXPECT_EQ(encode(Deth{}, buf, sizeof(buf)), 8u);
}

TEST(HostWireTest, NegotiationPicksTheHighestCommonVersion) {
  Hello a, b;
  a.version_min = 1, a.version_max = 3;
  b.version_min = 2, b.version_max = 5;
  EXPECT_EQ(negotiate(a, b), 3);
  b.version_min = 4;
  EXPECT_EQ(negotiate(a, b), 0);
  b = Hello{};
  b.magic = 0x12345678;
  EXPECT_EQ(negotiate(a, b), 0);
  EXPECT_EQ(negotiate(Hello{}, Hello{}), kVersionMax);
}

TEST(HostWireTest, EveryOpcodeRoundTrips) {
  int known = 0;
  for (int opcode = 0; opcode < 256; ++opcode) {
    OpcodeShape s;
    if (!opcode_shape(static_cast<uint8_t>(opcode), &s)) continue;
    ++known;
    for (uint8_t flags : {uint8_t{0}, uint8_t{kSolicited | kAckRequest | kHasGrh}}) {
      Packet p =
          make(static_cast<uint8_t>(opcode),
               s.payload ? std::vector<uint8_t>{1, 2, 3, 4, 5} : std::vector<uint8_t>{}, flags);
      ASSERT_TRUE(finish_packet(&p)) << opcode;
      std::vector<uint8_t> bytes = wire(p);
      ASSERT_EQ(bytes.size(), kPacketHeaderSize + p.hdr.length);
      Packet d;
      size_t used = 0;
      ASSERT_EQ(decode_packet(bytes.data(), bytes.size(), &d, &used), DecodeStatus::kOk) << opcode;
      EXPECT_EQ(used, bytes.size());
      EXPECT_EQ(d.hdr.opcode, opcode);
      EXPECT_EQ(d.hdr.flags, flags);
      EXPECT_EQ(d.hdr.dest_qpn, 0x123456u);
      EXPECT_EQ(d.hdr.psn, 0xfffffeu);
      EXPECT_EQ(d.hdr.dlid, 0x401);
      EXPECT_EQ(d.hdr.network, 0xa1b2c3d4u);
      EXPECT_EQ(d.has_reth, s.reth);
      EXPECT_EQ(d.has_xrceth, s.xrceth);
      if (d.has_xrceth) {
        EXPECT_EQ(d.xrc_srqn, 0xabcdefu);
      }
      EXPECT_EQ(d.has_imm, s.imm);
      EXPECT_EQ(d.has_grh, (flags & kHasGrh) != 0);
      if (d.has_reth) {
        EXPECT_EQ(d.reth.dma_length, 1u << 30);
      }
      if (d.has_imm) {
        EXPECT_EQ(d.imm, 0xdeadbeefu);
      }
      if (d.has_aeth) {
        EXPECT_EQ(d.aeth.msn, 77u);
      }
      if (d.has_atomic) {
        EXPECT_EQ(d.atomic.compare, 6u);
      }
      if (d.has_atomic_ack) {
        EXPECT_EQ(d.atomic_orig, 0x1122334455667788u);
      }
      if (d.has_deth) {
        EXPECT_EQ(d.deth.src_qp, 0x222u);
      }
      if (d.has_grh) {
        EXPECT_EQ(d.grh.dgid[15], 2);
      }
      ASSERT_EQ(d.payload_len, p.payload_len);
      EXPECT_EQ(std::vector<uint8_t>(d.payload, d.payload + d.payload_len),
                std::vector<uint8_t>(p.payload, p.payload + p.payload_len));
      EXPECT_EQ(d.payload, bytes.data() + bytes.size() - d.payload_len);
    }
  }
  // RC and XRC: 21 operations, the two SEND with Invalidate and ATOMIC WRITE; UC: sends and
  // writes (12); UD: send only, with or without immediate.
  EXPECT_EQ(known, 2 * (21 + 3) + 12 + 2);
}

TEST(HostWireTest, ExtensionLayoutOfAWriteWithImmediate) {
  Packet p = make(opcode_of(kRc, kWriteOnlyImm), {9, 9});
  ASSERT_TRUE(finish_packet(&p));
  std::vector<uint8_t> b = wire(p);
  ASSERT_EQ(b.size(), kPacketHeaderSize + 16 + 4 + 2);
  EXPECT_EQ(b[0], 16 + 4 + 2);  // length, little-endian
  EXPECT_EQ(b[4], opcode_of(kRc, kWriteOnlyImm));
  EXPECT_EQ(b[kPacketHeaderSize], 0x44);       // RETH va starts right after the header
  EXPECT_EQ(b[kPacketHeaderSize + 16], 0xef);  // then the immediate (0xdeadbeef, little-endian)
}

// An XRC request names its SRQ in the XRCETH, right after the header; XRC responses do not.
TEST(HostWireTest, XrcRequestsCarryTheirSrqNumber) {
  Packet p = make(opcode_of(kXrc, kWriteOnly), {9});
  ASSERT_TRUE(finish_packet(&p));
  std::vector<uint8_t> b = wire(p);
  ASSERT_EQ(b.size(), kPacketHeaderSize + 4 + 16 + 1);
  EXPECT_EQ(b[kPacketHeaderSize], 0xef);      // 0xabcdef, little-endian
  EXPECT_EQ(b[kPacketHeaderSize + 4], 0x44);  // then the RETH
  Packet ack = make(opcode_of(kXrc, kAcknowledge), {});
  ASSERT_TRUE(finish_packet(&ack));
  EXPECT_FALSE(ack.has_xrceth);
  Packet read = make(opcode_of(kXrc, kReadResponseOnly), {1});
  ASSERT_TRUE(finish_packet(&read));
  EXPECT_FALSE(read.has_xrceth);
  // An SRQ number wider than 24 bits is refused.
  b[kPacketHeaderSize + 3] = 1;
  Packet d;
  size_t used = 0;
  EXPECT_EQ(decode_packet(b.data(), b.size(), &d, &used), DecodeStatus::kBad);
}

TEST(HostWireTest, PartialInputAsksForMore) {
  Packet p = make(opcode_of(kRc, kSendOnly), std::vector<uint8_t>(100, 7));
  ASSERT_TRUE(finish_packet(&p));
  std::vector<uint8_t> b = wire(p);
  for (size_t n = 0; n < b.size(); ++n) {
    Packet d;
    size_t used = 0;
    ASSERT_EQ(decode_packet(b.data(), n, &d, &used), DecodeStatus::kNeedMore) << n;
    // How much to fetch: known once the header is there.
    EXPECT_EQ(packet_size(b.data(), n), n < kPacketHeaderSize ? 0 : b.size()) << n;
  }
  // A length decode_packet refuses leaves the decision to it.
  std::vector<uint8_t> absurd = b;
  absurd[3] = 0x10;
  EXPECT_EQ(packet_size(absurd.data(), absurd.size()), kPacketHeaderSize);
  // Two packets back to back: the first is decoded alone.
  std::vector<uint8_t> two = b;
  two.insert(two.end(), b.begin(), b.end());
  Packet d;
  size_t used = 0;
  ASSERT_EQ(decode_packet(two.data(), two.size(), &d, &used), DecodeStatus::kOk);
  EXPECT_EQ(used, b.size());
}

// A reader that receives a payload where it is to go needs the headers alone: a READ
// response's AETH comes with them, and nothing of the payload is needed or pointed at.
TEST(HostWireTest, HeadersDecodeWithoutTheirPayload) {
  Packet p = make(opcode_of(kRc, kReadResponseLast), std::vector<uint8_t>(5000, 9));
  p.aeth.msn = 77;
  ASSERT_TRUE(finish_packet(&p));
  std::vector<uint8_t> b = wire(p);
  const size_t headers = kPacketHeaderSize + 8;  // the header and an AETH
  for (size_t n = 0; n < headers; ++n) {
    Packet d;
    size_t h = 0;
    ASSERT_EQ(decode_headers(b.data(), n, &d, &h), DecodeStatus::kNeedMore) << n;
  }
  for (size_t n : {headers, headers + 1, b.size()}) {
    Packet d;
    size_t h = 0;
    ASSERT_EQ(decode_headers(b.data(), n, &d, &h), DecodeStatus::kOk) << n;
    EXPECT_EQ(h, headers);
    EXPECT_EQ(d.payload_len, 5000u);
    EXPECT_EQ(d.payload, nullptr);
    EXPECT_TRUE(d.has_aeth);
    EXPECT_EQ(d.aeth.msn, 77u);
  }
  // What decode_packet refuses, decode_headers refuses as soon as it sees it.
  b[5] = 0x80;  // an unknown flag
  Packet d;
  size_t h = 0;
  EXPECT_EQ(decode_headers(b.data(), kPacketHeaderSize, &d, &h), DecodeStatus::kBad);
}

TEST(HostWireTest, WhatThisVersionDoesNotAcceptIsRejected) {
  auto status_after = [](auto&& mutate) {
    Packet p = make(opcode_of(kRc, kAcknowledge), {});
    EXPECT_TRUE(finish_packet(&p));
    std::vector<uint8_t> b = wire(p);
    mutate(b);
    Packet d;
    size_t used = 0;
    return decode_packet(b.data(), b.size(), &d, &used);
  };
  EXPECT_EQ(status_after([](auto&) {}), DecodeStatus::kOk);
  EXPECT_EQ(status_after([](auto& b) { b[4] = 0x1f; }), DecodeStatus::kBad);  // unknown op
  EXPECT_EQ(status_after([](auto& b) { b[4] = opcode_of(kUc, kReadRequest); }), DecodeStatus::kBad);
  EXPECT_EQ(status_after([](auto& b) { b[5] = 0x80; }), DecodeStatus::kBad);  // unknown flag
  EXPECT_EQ(status_after([](auto& b) { b[15] = 1; }), DecodeStatus::kBad);    // dest QPN > 24 bits
  EXPECT_EQ(status_after([](auto& b) { b[kPacketHeaderSize] = 0x40; }),
            DecodeStatus::kBad);        // AETH syndrome
  EXPECT_EQ(status_after([](auto& b) {  // an ACK with a payload byte
              b[0] += 1;
              b.push_back(0);
            }),
            DecodeStatus::kBad);
  EXPECT_EQ(status_after([](auto& b) {  // an absurd length is refused before buffering it
              b[3] = 0x10;
            }),
            DecodeStatus::kBad);
  Packet p = make(opcode_of(kRc, kReadRequest), {1});
  EXPECT_FALSE(finish_packet(&p));  // READ requests carry no payload
  p = make(opcode_of(kRc, kSendOnly), std::vector<uint8_t>(kMaxSegment + 1));
  EXPECT_FALSE(finish_packet(&p));
}

TEST(HostWireTest, AethSyndromes) {
  EXPECT_EQ(aeth_kind(aeth_ack()), AethKind::kAck);
  EXPECT_EQ(aeth_kind(aeth_rnr(31)), AethKind::kRnr);
  EXPECT_EQ(aeth_rnr(31) & 0x1f, 31);
  EXPECT_EQ(aeth_kind(aeth_nak(kNakRemoteAccess)), AethKind::kNak);
  EXPECT_EQ(aeth_nak(kNakRemoteAccess) & 0x1f, kNakRemoteAccess);
  EXPECT_EQ(aeth_kind(0x40), AethKind::kReserved);
}

}  // namespace
}  // namespace wharf::proto::host
