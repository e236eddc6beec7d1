// Host-to-host wire format: what routers exchange over their shared TCP connections
// (docs/wire-protocol.md, "Host-to-host transport"; issue #3).
//
// A connection starts with one Hello each way (version negotiation), then carries packets
// modelled on InfiniBand's transport headers: a fixed PacketHeader (addressing, IBA opcode,
// PSN) followed by the extension headers the opcode calls for, in IBA order, and the payload.
// Every field is explicit little-endian (proto/codec.h); nothing is cast from the stream.
// Field order in each `visit` IS the layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "proto/messages.h"

namespace wharf::proto::host {

constexpr uint32_t kMagic = 0x50544857;  // "WHTP" as little-endian bytes
// Versions this build speaks. 4: the XRC transport (XRCETH); 3: SEND with Invalidate
// (opcodes 0x16, 0x17, IETH) and ATOMIC WRITE (0x1d); 2: PacketHeader.network.
constexpr uint16_t kVersionMin = 4;
constexpr uint16_t kVersionMax = 4;
constexpr uint32_t kMaxSegment = 64 * 1024;  // payload bytes in one packet
// A UD SEND-only packet to this QPN (Q_Key 0) carries an Ethernet frame a RAW_PACKET QP sent,
// for the RAW_PACKET QPs of the sender's virtual network on the receiving host.
constexpr uint32_t kRawFrameQpn = 0xfffffe;

// ---- Connection setup: each side sends Hello, then reads the other's. ----
struct Hello {
  uint32_t magic = kMagic;
  uint16_t version_min = kVersionMin;
  uint16_t version_max = kVersionMax;
  uint8_t traffic_class = 0;  // the class this connection carries (its DSCP follows from it)
  uint8_t reserved0 = 0;
  uint16_t reserved1 = 0;
  uint32_t incarnation = 0;  // changes at every router start: a peer that restarted is new
  uint64_t node_guid = 0;
  Name host{};  // the sender's host name in the cluster
  template <class V>
  void visit(V&& v) {
    v(magic), v(version_min), v(version_max), v(traffic_class), v(reserved0), v(reserved1),
        v(incarnation), v(node_guid), v(host);
  }
};
constexpr size_t kHelloSize = 56;

// The version both sides then use: the highest both speak, or 0 when there is none (the
// connection is closed).
uint16_t negotiate(const Hello& mine, const Hello& theirs);

// ---- Packets ----
// IBTA opcodes (table 38): transport in bits 7-5 (RC 0x00, UC 0x20, UD 0x60, XRC 0xa0),
// operation in bits 4-0. XRC has RC's operations; its requests carry an XRCETH.
enum Transport : uint8_t { kRc = 0x00, kUc = 0x20, kUd = 0x60, kXrc = 0xa0 };
enum Operation : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0a,
  kWriteOnlyImm = 0x0b,
  kReadRequest = 0x0c,
  kReadResponseFirst = 0x0d,
  kReadResponseMiddle = 0x0e,
  kReadResponseLast = 0x0f,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInvalidate = 0x16,  // IETH: the responder's memory window key to invalidate
  kSendOnlyInvalidate = 0x17,
  kAtomicWrite = 0x1d,  // RETH and the 8 bytes to store, acknowledged like a WRITE
};

constexpr uint8_t opcode_of(Transport t, Operation op) {
  return static_cast<uint8_t>(static_cast<uint8_t>(t) | static_cast<uint8_t>(op));
}

// What an operation (opcode & 0x1f) is part of, as IBTA 9.8.3 sequences them.
constexpr bool has_invalidate(uint8_t op) {
  return op == kSendLastInvalidate || op == kSendOnlyInvalidate;
}
constexpr bool is_send(uint8_t op) { return op <= kSendOnlyImm || has_invalidate(op); }
constexpr bool is_write(uint8_t op) { return op >= kWriteFirst && op <= kWriteOnlyImm; }
constexpr bool starts_message(uint8_t op) {
  return op == kSendFirst || op == kSendOnly || op == kSendOnlyImm || op == kSendOnlyInvalidate ||
         op == kWriteFirst || op == kWriteOnly || op == kWriteOnlyImm;
}
constexpr bool ends_message(uint8_t op) {
  return op == kSendLast || op == kSendLastImm || op == kSendOnly || op == kSendOnlyImm ||
         has_invalidate(op) || op == kWriteLast || op == kWriteLastImm || op == kWriteOnly ||
         op == kWriteOnlyImm;
}
// A packet of a message (or of a READ's responses) that more packets of it follow.
constexpr bool continues_message(uint8_t op) {
  return op == kSendFirst || op == kSendMiddle || op == kWriteFirst || op == kWriteMiddle ||
         op == kReadResponseFirst || op == kReadResponseMiddle;
}
constexpr bool has_imm(uint8_t op) {
  return op == kSendLastImm || op == kSendOnlyImm || op == kWriteLastImm || op == kWriteOnlyImm;
}
constexpr bool is_read_response(uint8_t op) {
  return op >= kReadResponseFirst && op <= kReadResponseOnly;
}
// A responder's answer (ACK, atomic ACK, READ response) rather than a request.
constexpr bool is_response(uint8_t op) {
  return op == kAcknowledge || op == kAtomicAcknowledge || is_read_response(op);
}

enum PacketFlags : uint8_t {
  kSolicited = 1u << 0,   // BTH SE
  kAckRequest = 1u << 1,  // BTH A
  kHasGrh = 1u << 2,      // a Grh precedes the extension headers
};
constexpr uint8_t kKnownFlags = kSolicited | kAckRequest | kHasGrh;

struct PacketHeader {
  uint32_t length = 0;  // bytes after this header: extension headers, then payload
  uint8_t opcode = 0;   // transport | operation
  uint8_t flags = 0;    // PacketFlags
  uint8_t sl = 0;       // service level of the requester's address vector
  uint8_t reserved = 0;
  uint16_t dlid = 0;  // destination and source port LIDs (0 on Ethernet link layer)
  uint16_t slid = 0;
  uint32_t dest_qpn = 0;  // 24 bits
  uint32_t src_qpn = 0;   // 24 bits
  uint32_t psn = 0;       // 24 bits
  // Requests: the receiving router's number for the sender's virtual network (0: unknown to
  // it), which it checks against the destination's (docs/wire-protocol.md, "Isolation").
  uint32_t network = 0;
  template <class V>
  void visit(V&& v) {
    v(length), v(opcode), v(flags), v(sl), v(reserved), v(dlid), v(slid), v(dest_qpn), v(src_qpn),
        v(psn), v(network);
  }
};
constexpr size_t kPacketHeaderSize = 28;
// The most a packet's extension headers take (every kind at once: a bound, not a shape).
constexpr size_t kMaxExtensionsSize = 120;
// The longest packet decode_packet accepts: header, extensions and a full segment.
constexpr size_t kMaxPacketSize = kPacketHeaderSize + kMaxExtensionsSize + kMaxSegment;

// Global route (UD with a GRH address vector): what the receiver's 40-byte GRH is made of.
struct Grh {
  uint32_t ver_tc_flow = 0;  // IP version 6 (4 bits), traffic class (8), flow label (20)
  uint8_t hop_limit = 0;
  uint8_t reserved[3] = {};
  Gid sgid{};
  Gid dgid{};
  template <class V>
  void visit(V&& v) {
    v(ver_tc_flow), v(hop_limit), v(reserved), v(sgid), v(dgid);
  }
};
// RDMA extended header: the target of a WRITE (first or only packet) or READ request.
struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;  // bytes of the whole message
  template <class V>
  void visit(V&& v) {
    v(va), v(rkey), v(dma_length);
  }
};
struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
  uint64_t swap_add = 0;  // swap value (CompareSwap) or addend (FetchAdd)
  uint64_t compare = 0;
  template <class V>
  void visit(V&& v) {
    v(va), v(rkey), v(reserved), v(swap_add), v(compare);
  }
};
// ACK extended header: syndrome (see aeth_*) and the responder's message sequence number.
struct Aeth {
  uint8_t syndrome = 0;
  uint8_t reserved[3] = {};
  uint32_t msn = 0;  // 24 bits
  template <class V>
  void visit(V&& v) {
    v(syndrome), v(reserved), v(msn);
  }
};
// Datagram extended header (UD).
struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
  template <class V>
  void visit(V&& v) {
    v(qkey), v(src_qp);
  }
};

// AETH syndromes (IBTA 9.7.5.2.5): ACK, RNR NAK with its timer field, NAK with a code.
enum NakCode : uint8_t {
  kNakPsnSequence = 0,
  kNakInvalidRequest = 1,
  kNakRemoteAccess = 2,
  kNakRemoteOperational = 3,
};
constexpr uint8_t aeth_ack() { return 0x00; }
constexpr uint8_t aeth_rnr(uint8_t timer) { return static_cast<uint8_t>(0x20 | (timer & 0x1f)); }
constexpr uint8_t aeth_nak(NakCode c) { return static_cast<uint8_t>(0x60 | c); }
enum class AethKind { kAck, kRnr, kNak, kReserved };
constexpr AethKind aeth_kind(uint8_t s) {
  switch (s >> 5) {
    case 0: return AethKind::kAck;
    case 1: return AethKind::kRnr;
    case 3: return AethKind::kNak;
    default: return AethKind::kReserved;
  }
}

// One decoded packet. `payload` points into the buffer it was decoded from.
struct Packet {
  PacketHeader hdr;
  bool has_grh = false, has_xrceth = false, has_reth = false, has_atomic = false, has_imm = false,
       has_aeth = false, has_atomic_ack = false, has_deth = false;
  Grh grh;
  uint32_t xrc_srqn = 0;  // XRCETH (24 bits): the XRC SRQ an XRC request is for
  Reth reth;
  AtomicEth atomic;
  // Immediate data (network order as the application gave it), or the IETH's key (SEND
  // with Invalidate): both take the same 4 bytes after the RETH's place.
  uint32_t imm = 0;
  Aeth aeth;
  uint64_t atomic_orig = 0;  // AtomicAckETH: the value before the atomic
  Deth deth;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
};

// Which extension headers and whether a payload an opcode carries; false for opcodes this
// version does not know.
struct OpcodeShape {
  bool xrceth, reth, atomic, imm, aeth, atomic_ack, deth, payload;
};
bool opcode_shape(uint8_t opcode, OpcodeShape* shape);

// Marks the extension headers p's opcode calls for and sets hdr.length from them and
// payload_len. False for an unknown opcode or a payload the opcode does not carry.
bool finish_packet(Packet* p);

// Writes the header and extension headers of a finished packet (the payload follows on the
// wire, written by the caller). Returns bytes written, or 0 if cap is too small.
size_t encode_headers(const Packet& p, uint8_t* out, size_t cap);

enum class DecodeStatus { kOk, kNeedMore, kBad };
// Decodes one packet from the start of buf: kNeedMore when buf holds only part of it, kBad
// for anything this version does not accept (the connection is then closed). On kOk,
// *consumed is the packet's size.
DecodeStatus decode_packet(const uint8_t* buf, size_t len, Packet* out, size_t* consumed);
// Decodes the header and extension headers of the packet at the start of buf, which need not
// hold its payload: kNeedMore until they are all there, kBad as decode_packet. On kOk,
// out->payload_len is what the header says follows them (out->payload stays null) and
// *headers their size, so a reader may receive the payload wherever it is to go.
DecodeStatus decode_headers(const uint8_t* buf, size_t len, Packet* out, size_t* headers);
// The size of the packet whose first `len` bytes are at buf, as its header says, so that a
// reader can fetch exactly the rest of it: 0 while the header is incomplete. A header that
// decode_packet refuses for its length gives kPacketHeaderSize (decode it to see).
size_t packet_size(const uint8_t* buf, size_t len);

}  // namespace wharf::proto::host
