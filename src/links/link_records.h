// The record layer of `--link-security encrypt` (docs/wire-protocol.md section 2.2). Once the
// TLS 1.3 handshake has authenticated both routers (links/link_tls.h), each direction of a
// link is a stream of records sealed with AES-128-GCM under keys of its own, derived from the
// session by the TLS exporter (RFC 8446 section 7.5), as DTLS-SRTP derives SRTP's keys.
//
// Why our own records and not OpenSSL's: this layer works between the router's own buffers. A
// router seals from its send queue straight into the bytes it gives the socket, and opens from
// what it read straight into its packet buffer: one pass over each byte each way. Through
// SSL_write and SSL_read every byte was also copied through OpenSSL's record buffers, and the
// records went to the socket one 16 KiB record per send() or through one more buffer, which
// together cost more than the cipher (docs/PERFORMANCE.md, "Where the CPU goes").
//
// A record: a 4-byte big-endian payload length (1..kMaxPayload), the payload encrypted, then
// GCM's 16-byte tag over both (the length is the additional data). The nonce is the
// direction's IV XOR the record's sequence number, as in TLS 1.3, so a record that was
// changed, forged, replayed, dropped, reordered or reflected back fails its check. After
// kRecordsPerKey records a direction moves on to its next key, both ends at the same record
// and with no message: secret' = HKDF-Expand(secret, "wharf key update"). So no key seals more
// than kRecordsPerKey x kMaxPayload bytes (4 GiB; TLS 1.3 allows AES-GCM about 2^24.5 records
// of 16 KiB, some 380 GB, per key), and a key taken from a router's memory does not open the
// records sealed before it came into use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "links/byte_queue.h"

using SSL = struct ssl_st;
using EVP_CIPHER_CTX = struct evp_cipher_ctx_st;

namespace wharf::links {

class RecordCipher {
 public:
  static constexpr size_t kHeaderSize = 4;
  static constexpr size_t kTagSize = 16;
  static constexpr size_t kOverhead = kHeaderSize + kTagSize;
  static constexpr size_t kMaxPayload = 64 * 1024;
  static constexpr uint64_t kRecordsPerKey = uint64_t{1} << 16;
  static constexpr size_t kSecretSize = 32;
  enum class Direction { kSeal, kOpen };

  // What one end of an authenticated session seals (its direction) and opens (the peer's).
  struct Pair {
    std::unique_ptr<RecordCipher> seal;
    std::unique_ptr<RecordCipher> open;
  };
  // The record ciphers of `session`, whose handshake has finished, for the end that dialled
  // (`client`) or accepted. False with *why if OpenSSL cannot derive them.
  static bool from_session(SSL* session, bool client, Pair* out, std::string* why);
  // A direction from its first secret (what from_session exports; tests and fuzzing make their
  // own), moving to the next key every `records_per_key` records. nullptr if OpenSSL fails.
  static std::unique_ptr<RecordCipher> make(const uint8_t* secret, Direction direction,
                                            uint64_t records_per_key = kRecordsPerKey);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Sealing: the n bytes at `plain` (1..kMaxPayload) become the next record, the n + kOverhead
  // bytes at `record` (the two must not overlap). False: OpenSSL failed; the link must close.
  bool seal(const uint8_t* plain, size_t n, uint8_t* record);
  // The payload length the record header at `header` (kHeaderSize bytes) announces, or 0 if it
  // is out of range: the stream is corrupt or not ours.
  static size_t payload_size(const uint8_t* header);
  // Opening: the next record, the payload_size(record) + kOverhead bytes at `record` (a valid
  // header), into its payload at `plain` (payload_size bytes; the two must not overlap). False:
  // it failed its check, and `plain` holds nothing to use; the stream cannot go on.
  bool open(const uint8_t* record, uint8_t* plain);

  // A link's queues: seals what `plain` holds into records at the end of `sealed` (kMaxPayload
  // bytes of it per record) while `sealed` holds less than `limit`, taking it off `plain`;
  // *taken is how much. False: sealing failed; the link must close.
  bool seal_queued(ByteQueue* plain, ByteQueue* sealed, size_t limit, size_t* taken);
  // Opens the whole records at the front of `sealed` into the end of `plain`, taking them off
  // `sealed` (a record not yet whole stays). False: a record was out of range or failed its
  // check, and what it opened is taken back off `plain`; the stream cannot go on.
  bool open_queued(ByteQueue* sealed, ByteQueue* plain);

 private:
  RecordCipher(Direction direction, uint64_t records_per_key);
  // Derives the key and IV of secret_ and starts the sequence again.
  bool use_secret();
  // The nonce of the next record into iv (kIvSize bytes), after moving to the next key if the
  // current one has done its records. False: OpenSSL failed.
  bool next_nonce(uint8_t* iv);

  static constexpr size_t kIvSize = 12;
  const Direction direction_;
  const uint64_t records_per_key_;
  EVP_CIPHER_CTX* ctx_ = nullptr;
  uint8_t secret_[kSecretSize] = {};
  uint8_t iv_[kIvSize] = {};
  uint64_t sequence_ = 0;  // records sealed or opened under the current key
};

}  // namespace wharf::links
