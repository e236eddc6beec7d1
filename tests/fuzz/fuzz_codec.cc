// Fuzz target for the control-message decoder (proto/codec.h over proto/messages.h).
//
// The input is taken as a datagram two ways: as Header + body, and as a bare message (the
// router's event datagrams carry no header). For every message type, wherever decoding
// succeeds:
//   - differential round trip: re-encoding must reproduce the input bytes exactly;
//   - independent oracle: each decoded field must equal the little-endian integer read by hand
//     from the input at that field's offset (field widths come from the message's visit list);
//   - decoding succeeds exactly when the length is the message's documented size, and encoding
//     into one byte less than that fails.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "fuzz_check.h"
#include "proto/codec.h"
#include "proto/messages.h"
#include "unit/proto_message_types.h"

namespace wharf::proto {
namespace {

using test_support::Spec;

// Each integer field's value and width, in visit order.
struct FieldList {
  std::vector<uint64_t> values;
  std::vector<size_t> widths;
  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_integral_v<T>) {
      values.push_back(static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v)));
      widths.push_back(sizeof(T));
    } else if constexpr (std::is_array_v<T> || requires { std::tuple_size<T>::value; }) {
      for (auto& e : v) (*this)(e);
    } else {
      v.visit(*this);
    }
  }
};

template <class T>
void check_message(const uint8_t* bytes, size_t len) {
  T msg{};
  const bool ok = decode(bytes, len, &msg);
  WHARF_FUZZ_CHECK(ok == (len == Spec<T>::kSize), Spec<T>::kName);
  if (!ok) return;

  uint8_t out[kMaxMessage + 1];
  const size_t n = encode(msg, out, sizeof(out));
  WHARF_FUZZ_CHECK(n == len, Spec<T>::kName);
  WHARF_FUZZ_CHECK(std::memcmp(out, bytes, n) == 0, Spec<T>::kName);
  if (n > 0) WHARF_FUZZ_CHECK(encode(msg, out, n - 1) == 0, Spec<T>::kName);

  FieldList fields;
  fields(msg);
  size_t off = 0;
  for (size_t i = 0; i < fields.values.size(); ++i) {
    uint64_t want = 0;
    for (size_t b = 0; b < fields.widths[i]; ++b) {
      want |= static_cast<uint64_t>(bytes[off + b]) << (8 * b);
    }
    WHARF_FUZZ_CHECK(fields.values[i] == want, Spec<T>::kName);
    off += fields.widths[i];
  }
  WHARF_FUZZ_CHECK(off == len, Spec<T>::kName);
}

}  // namespace
}  // namespace wharf::proto

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wharf::proto;
  if (size > kMaxMessage) return -1;  // never a valid datagram; keeps the corpus small

  // Bare message (event datagrams, and every type as a whole datagram).
  test_support::for_each_type(test_support::AllMessages{},
                              [&]<class T>() { check_message<T>(data, size); });

  // Header, then body.
  Header h;
  Reader r(data, size);
  r(h);
  if (!r.ok()) {
    WHARF_FUZZ_CHECK(size < kHeaderSize, "header");
    return 0;
  }
  WHARF_FUZZ_CHECK(r.pos() == kHeaderSize, "header");
  uint8_t out[kHeaderSize];
  WHARF_FUZZ_CHECK(encode(h, out, sizeof(out)) == kHeaderSize, "header");
  WHARF_FUZZ_CHECK(std::memcmp(out, data, kHeaderSize) == 0, "header");
  test_support::for_each_type(test_support::AllMessages{}, [&]<class T>() {
    check_message<T>(data + kHeaderSize, size - kHeaderSize);
  });
  return 0;
}
