// Express lines (issue #18 item 5; docs/wire-protocol.md, "Express lines"): one TCP
// connection per connected RC QP pair between hosts, brokered by the two routers and then
// used by the two libraries themselves, so a ping-pong between hosts needs no router thread.
//
// The connecting router (router/express.h says which) opens the connection to the peer router's
// express port and writes a Hello naming both QPs; the accepting router checks it, answers
// kAccepted and hands its end to the library owning the destination QP, and the connecting router
// hands its end to its library on reading kAccepted. After that, only frames flow, each library
// sending what its QP posts and acknowledging what it executes:
//
//   Ready    "I read this connection": the peer may send Messages from now on.
//   Message  one SEND or SEND_WITH_IMM, its payload following the frame.
//   Ack      nothing but the acknowledgement every frame carries (below).
//   Refuse   the Message seq was not executed (and no later one of its epoch will be): the
//            sender hands it and every later work request to its router, which applies the
//            full semantics (RNR waits, errors). A later epoch starts afresh.
//
// Every frame acknowledges (`ack`, cumulative) the peer's Messages its sender has executed,
// so a reply carries the acknowledgement of the request; a lone Ack goes only when nothing
// else is sent soon (abi/verbs/express.h says when).
//
// Every field is explicit little-endian (proto/codec.h); the input is hostile: a frame that
// does not decode closes the line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/codec.h"
#include "proto/device.h"

namespace wharf::proto::express {

constexpr uint32_t kHelloMagic = 0x50585857;  // "WXXP" as little-endian bytes
constexpr uint16_t kVersion = 1;
// The largest message an express line carries: the device's (a receiver places a Message's
// payload straight into the receive's memory as it arrives, buffering none of it).
constexpr uint32_t kMaxMessage = device::kMaxMsgSize;

// Router to router, first on a new connection.
struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t version = kVersion;
  uint16_t src_host = 0;     // the connecting router's index in the cluster file
  uint32_t src_qpn = 0;      // the connecting router's QP
  uint32_t dst_qpn = 0;      // the accepting router's QP, which must name src_qpn as its peer
  uint32_t incarnation = 0;  // of the connecting router (host_wire.h Hello)
  template <class V>
  void visit(V&& v) {
    v(magic), v(version), v(src_host), v(src_qpn), v(dst_qpn), v(incarnation);
  }
};
constexpr size_t kHelloSize = 20;
// Router to router, the accepting router's answer to a Hello once its QP is ready: the only
// byte it writes. The connecting router hands its end to its library only after reading it
// (a connection closed instead means no line: the QPs stay on the routers).
constexpr uint8_t kAccepted = 0xac;

enum Kind : uint8_t { kReady = 1, kMessage = 2, kAck = 3, kRefuse = 4 };
// Frame::flags
constexpr uint8_t kSolicited = 1;
constexpr uint8_t kWithImm = 2;

struct Frame {
  uint8_t kind = 0;
  uint8_t flags = 0;
  uint8_t epoch = 0;  // Message, Refuse: the Message's refusal epoch
  uint8_t reserved = 0;
  uint32_t seq = 0;     // Message: its number (from 1); Refuse: the refused one's
  uint32_t ack = 0;     // the last of the peer's Messages executed here (0: none yet)
  uint32_t imm = 0;     // Message with kWithImm: the immediate, as the application gave it
  uint32_t length = 0;  // Message: payload bytes that follow; others 0
  template <class V>
  void visit(V&& v) {
    v(kind), v(flags), v(epoch), v(reserved), v(seq), v(ack), v(imm), v(length);
  }
};
constexpr size_t kFrameSize = 20;

// Decodes a Frame and checks it is one a peer may send: a known kind, a Message no longer
// than kMaxMessage, no payload on anything else, no unknown flags.
bool decode_frame(const uint8_t* bytes, Frame* f);
void encode_frame(const Frame& f, uint8_t* bytes);

// The frame whose header starts a received stream's bytes[0, len): kFrame (*f; its payload,
// f->length bytes, follows the header and need not all be there yet), kNeedMore (a prefix of
// a header), or kBad (the line is closed).
enum class Next { kFrame, kNeedMore, kBad };
Next next_header(const uint8_t* bytes, size_t len, Frame* f);
// Decodes the Hello and checks its magic and version.
bool decode_hello(const uint8_t* bytes, Hello* h);

}  // namespace wharf::proto::express
