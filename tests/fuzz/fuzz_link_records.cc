// Fuzz target for links/link_records.h: with `encrypt`, what a router reads from a link is
// records an on-path attacker may have changed, cut or forged (docs/SECURITY.md).
//
// The input is a program. Its first byte chooses:
// - even: the rest is what the socket delivered, in two reads split where the next byte says.
//   Checked: the opener never hands up more bytes than arrived, and every byte it takes off the
//   stream belongs to a whole record.
// - odd: the rest is a sender's plaintext (after a u32 position and a byte of record size,
//   1 + byte x 257 bytes a record), sealed by the sending end as a router seals its queue;
//   if the position falls inside the records, one bit there is flipped on the way. Checked:
//   unchanged records open into exactly the plaintext; changed ones fail, and all the opener
//   handed up before is a prefix of the plaintext.
// Both ends use a fixed secret, so seeds made of plaintext reach past the tag check.
//
// Seeds (corpus/fuzz_link_records/): plaintext to seal whole and with a flipped bit in the
// header, body and tag; a TLS alert and random bytes as raw input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "links/byte_queue.h"
#include "links/link_records.h"

using wharf::fuzz::Input;
using wharf::links::ByteQueue;
using wharf::links::RecordCipher;

namespace {

constexpr uint8_t kSecret[RecordCipher::kSecretSize] = {0x77, 0x68, 0x61, 0x72, 0x66};

// Opens what arrives in two reads (the first `split` bytes, then the rest), as a router does.
// True if all of it opened.
bool receive(RecordCipher* opener, const uint8_t* data, size_t size, size_t split,
             ByteQueue* plain) {
  ByteQueue sealed;
  for (const auto& [from, n] : {std::pair{data, split}, std::pair{data + split, size - split}}) {
    if (n != 0) std::memcpy(sealed.append(n), from, n);
    const size_t sealed_before = sealed.size();
    const size_t plain_before = plain->size();
    if (!opener->open_queued(&sealed, plain)) return false;
    // What was taken off is whole records: each its payload (at least a byte) and kOverhead.
    const size_t records = sealed_before - sealed.size();
    const size_t payload = plain->size() - plain_before;
    WHARF_FUZZ_CHECK(records >= payload && (records - payload) % RecordCipher::kOverhead == 0,
                     "whole records taken");
    WHARF_FUZZ_CHECK((records == 0) == (payload == 0), "no empty records");
  }
  WHARF_FUZZ_CHECK(plain->size() <= size, "more out than in");
  return sealed.empty();
}

void raw(Input in, const uint8_t* data, size_t size) {
  const size_t split = in.u8() % (size + 1);
  auto opener = RecordCipher::make(kSecret, RecordCipher::Direction::kOpen);
  ByteQueue plain;
  receive(opener.get(), data, size, split, &plain);
}

void sealed(Input in, const uint8_t* data, size_t size) {
  const uint32_t flip = in.u32();
  const size_t record = 1 + size_t{in.u8()} * 257;
  const size_t split_byte = in.u8();
  const size_t header = 7;  // mode, flip, record size, split
  if (size <= header) return;
  data += header;
  size -= header;
  auto sealer = RecordCipher::make(kSecret, RecordCipher::Direction::kSeal);
  auto opener = RecordCipher::make(kSecret, RecordCipher::Direction::kOpen);
  ByteQueue wire;
  for (size_t off = 0; off < size; off += record) {
    ByteQueue chunk;
    const size_t n = std::min(record, size - off);
    std::memcpy(chunk.append(n), data + off, n);
    size_t taken = 0;
    WHARF_FUZZ_CHECK(sealer->seal_queued(&chunk, &wire, SIZE_MAX, &taken) && taken == n, "sealing");
  }
  const bool changed = flip / 8 < wire.size();
  if (changed) wire.data()[flip / 8] ^= static_cast<uint8_t>(1u << (flip % 8));
  ByteQueue plain;
  const bool opened =
      receive(opener.get(), wire.data(), wire.size(), split_byte * wire.size() / 256, &plain);
  WHARF_FUZZ_CHECK(opened == !changed, "opened exactly the unchanged stream");
  WHARF_FUZZ_CHECK(
      plain.size() <= size && (plain.empty() || std::memcmp(plain.data(), data, plain.size()) == 0),
      "a prefix of the plaintext");
  if (!changed) WHARF_FUZZ_CHECK(plain.size() == size, "all of the plaintext");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  if (size == 0) return 0;
  if ((in.u8() & 1) == 0) {
    raw(in, data + 2, size < 2 ? 0 : size - 2);
  } else {
    sealed(in, data, size);
  }
  return 0;
}
