#include "proto/host_wire.h"

#include <algorithm>

namespace wharf::proto::host {
namespace {

constexpr uint32_t kMaxQpn = 0xffffff;  // QPNs and PSNs are 24-bit fields
constexpr size_t kGrhSize = 40, kXrcethSize = 4, kRethSize = 16, kAtomicEthSize = 32, kImmSize = 4,
                 kAethSize = 8, kAtomicAckSize = 8, kDethSize = 8;
static_assert(kMaxExtensionsSize == kGrhSize + kXrcethSize + kRethSize + kAtomicEthSize + kImmSize +
                                        kAethSize + kAtomicAckSize + kDethSize);

// Extension headers in IBA order after the BTH; the GRH (which IBA places before the BTH)
// comes first. One list for encoding and decoding.
template <class P, class V>
void visit_extensions(P& p, V& v) {
  if (p.has_grh) v(p.grh);
  if (p.has_xrceth) v(p.xrc_srqn);
  if (p.has_deth) v(p.deth);
  if (p.has_reth) v(p.reth);
  if (p.has_atomic) v(p.atomic);
  if (p.has_aeth) v(p.aeth);
  if (p.has_atomic_ack) v(p.atomic_orig);
  if (p.has_imm) v(p.imm);
}

size_t extensions_size(const Packet& p) {
  return (p.has_grh ? kGrhSize : 0) + (p.has_xrceth ? kXrcethSize : 0) +
         (p.has_deth ? kDethSize : 0) + (p.has_reth ? kRethSize : 0) +
         (p.has_atomic ? kAtomicEthSize : 0) + (p.has_aeth ? kAethSize : 0) +
         (p.has_atomic_ack ? kAtomicAckSize : 0) + (p.has_imm ? kImmSize : 0);
}

void apply_shape(const OpcodeShape& s, Packet* p) {
  p->has_grh = (p->hdr.flags & kHasGrh) != 0;
  p->has_xrceth = s.xrceth;
  p->has_reth = s.reth;
  p->has_atomic = s.atomic;
  p->has_imm = s.imm;
  p->has_aeth = s.aeth;
  p->has_atomic_ack = s.atomic_ack;
  p->has_deth = s.deth;
}

}  // namespace

uint16_t negotiate(const Hello& mine, const Hello& theirs) {
  if (theirs.magic != kMagic) return 0;
  const uint16_t hi = std::min(mine.version_max, theirs.version_max);
  const uint16_t lo = std::max(mine.version_min, theirs.version_min);
  return hi >= lo ? hi : 0;
}

bool opcode_shape(uint8_t opcode, OpcodeShape* s) {
  const uint8_t transport = opcode & 0xe0;
  const uint8_t op = opcode & 0x1f;
  *s = OpcodeShape{};
  if (transport == kUd) {
    if (op != kSendOnly && op != kSendOnlyImm) return false;
    s->deth = s->payload = true;
    s->imm = op == kSendOnlyImm;
    return true;
  }
  if (transport != kRc && transport != kUc && transport != kXrc) return false;
  if (transport == kUc && op > kWriteOnlyImm) return false;  // UC: sends and writes only
  const bool reliable = transport != kUc;
  // XRC requests name their SRQ; responses (ACKs, READ responses) do not.
  s->xrceth = transport == kXrc && op != kAcknowledge && op != kAtomicAcknowledge &&
              (op < kReadResponseFirst || op > kReadResponseOnly);
  switch (op) {
    case kSendFirst:
    case kSendMiddle:
    case kSendLast:
    case kSendOnly:
    case kWriteMiddle:
    case kWriteLast:
    case kReadResponseMiddle: s->payload = true; return true;
    case kSendLastImm:
    case kSendOnlyImm:
    case kWriteLastImm: s->imm = s->payload = true; return true;
    case kSendLastInvalidate:
    case kSendOnlyInvalidate:
      if (!reliable) return false;  // IBTA: RC and XRC only
      s->imm = s->payload = true;
      return true;
    case kAtomicWrite:
      if (!reliable) return false;
      s->reth = s->payload = true;
      return true;
    case kWriteFirst:
    case kWriteOnly: s->reth = s->payload = true; return true;
    case kWriteOnlyImm: s->reth = s->imm = s->payload = true; return true;
    case kReadRequest: s->reth = true; return true;
    case kReadResponseFirst:
    case kReadResponseLast:
    case kReadResponseOnly: s->aeth = s->payload = true; return true;
    case kAcknowledge: s->aeth = true; return true;
    case kAtomicAcknowledge: s->aeth = s->atomic_ack = true; return true;
    case kCompareSwap:
    case kFetchAdd: s->atomic = true; return true;
    default: return false;
  }
}

bool finish_packet(Packet* p) {
  OpcodeShape s;
  if (!opcode_shape(p->hdr.opcode, &s) || p->payload_len > kMaxSegment ||
      (!s.payload && p->payload_len != 0))
    return false;
  apply_shape(s, p);
  p->hdr.length = static_cast<uint32_t>(extensions_size(*p) + p->payload_len);
  return true;
}

size_t encode_headers(const Packet& p, uint8_t* out, size_t cap) {
  Writer w(out, cap);
  w(p.hdr);
  visit_extensions(p, w);
  return w.ok() ? w.size() : 0;
}

size_t packet_size(const uint8_t* buf, size_t len) {
  if (len < kPacketHeaderSize) return 0;
  PacketHeader h;
  Reader hr(buf, kPacketHeaderSize);
  hr(h);
  if (h.length > kMaxExtensionsSize + kMaxSegment) return kPacketHeaderSize;
  return kPacketHeaderSize + h.length;
}

DecodeStatus decode_headers(const uint8_t* buf, size_t len, Packet* out, size_t* headers) {
  if (len < kPacketHeaderSize) return DecodeStatus::kNeedMore;
  *out = Packet{};
  Reader hr(buf, kPacketHeaderSize);
  hr(out->hdr);
  const PacketHeader& h = out->hdr;
  OpcodeShape s;
  if (h.length > kMaxExtensionsSize + kMaxSegment || (h.flags & ~kKnownFlags) != 0 ||
      h.dest_qpn > kMaxQpn || h.src_qpn > kMaxQpn || h.psn > kMaxQpn || !opcode_shape(h.opcode, &s))
    return DecodeStatus::kBad;
  apply_shape(s, out);
  const size_t extensions = extensions_size(*out);
  if (extensions > h.length) return DecodeStatus::kBad;
  if (len - kPacketHeaderSize < extensions) return DecodeStatus::kNeedMore;
  Reader r(buf + kPacketHeaderSize, extensions);
  visit_extensions(*out, r);
  if (!r.ok() || (out->has_aeth && aeth_kind(out->aeth.syndrome) == AethKind::kReserved) ||
      out->xrc_srqn > kMaxQpn)
    return DecodeStatus::kBad;
  out->payload_len = static_cast<uint32_t>(h.length - extensions);
  if ((!s.payload && out->payload_len != 0) || out->payload_len > kMaxSegment)
    return DecodeStatus::kBad;
  *headers = kPacketHeaderSize + extensions;
  return DecodeStatus::kOk;
}

DecodeStatus decode_packet(const uint8_t* buf, size_t len, Packet* out, size_t* consumed) {
  size_t headers = 0;
  const DecodeStatus st = decode_headers(buf, len, out, &headers);
  if (st != DecodeStatus::kOk) return st;
  if (len - kPacketHeaderSize < out->hdr.length) return DecodeStatus::kNeedMore;
  out->payload = buf + headers;
  *consumed = kPacketHeaderSize + out->hdr.length;
  return DecodeStatus::kOk;
}

}  // namespace wharf::proto::host
