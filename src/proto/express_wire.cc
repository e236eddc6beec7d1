// Express line frames: see express_wire.h.
#include "proto/express_wire.h"

namespace wharf::proto::express {

bool decode_frame(const uint8_t* bytes, Frame* f) {
  if (!decode(bytes, kFrameSize, f)) return false;
  switch (f->kind) {
    case kMessage: return f->length <= kMaxMessage && (f->flags & ~(kSolicited | kWithImm)) == 0;
    case kReady:
    case kAck:
    case kRefuse: return f->length == 0 && f->flags == 0;
    default: return false;
  }
}

void encode_frame(const Frame& f, uint8_t* bytes) { encode(f, bytes, kFrameSize); }

Next next_header(const uint8_t* bytes, size_t len, Frame* f) {
  if (len < kFrameSize) return Next::kNeedMore;
  return decode_frame(bytes, f) ? Next::kFrame : Next::kBad;
}

bool decode_hello(const uint8_t* bytes, Hello* h) {
  return decode(bytes, kHelloSize, h) && h->magic == kHelloMagic && h->version == kVersion;
}

}  // namespace wharf::proto::express
