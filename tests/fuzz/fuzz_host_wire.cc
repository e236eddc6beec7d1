// Fuzz target for proto/host_wire.h: the packet decoder faces bytes from another host.
//
// Checked for every input: decoding never reads outside the input (the input is an
// exactly-sized buffer under ASan); kOk consumes a whole packet whose payload lies inside it,
// and encoding the decoded packet again gives back exactly the bytes consumed; every proper
// prefix of an accepted packet asks for more, decode_headers takes exactly its headers from
// any prefix that holds them, and packet_size tells its size once the header is there; packet_size
// never says a packet ends before its header; the Hello decoder accepts exactly kHelloSize bytes
// and negotiation never picks a version outside both ranges.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "proto/host_wire.h"

using namespace wharf::proto;
using namespace wharf::proto::host;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> in(data, data + size);  // exactly sized: strays are heap overflows
  Packet p;
  size_t used = 0;
  if (decode_packet(in.data(), in.size(), &p, &used) == DecodeStatus::kOk) {
    WHARF_FUZZ_CHECK(used >= kPacketHeaderSize && used <= in.size(), "consumed size");
    WHARF_FUZZ_CHECK(p.payload >= in.data() && p.payload + p.payload_len == in.data() + used,
                     "payload outside the packet");
    std::vector<uint8_t> again(used);
    size_t n = encode_headers(p, again.data(), again.size());
    WHARF_FUZZ_CHECK(n == used - p.payload_len, "header size");
    WHARF_FUZZ_CHECK(std::memcmp(again.data(), in.data(), n) == 0, "headers do not round-trip");
    Packet copy = p;
    WHARF_FUZZ_CHECK(finish_packet(&copy) && copy.hdr.length == p.hdr.length,
                     "an accepted packet is not one we would send");
    const size_t headers = used - p.payload_len;
    for (size_t cut = 0; cut < used; cut += 1 + cut / 8) {
      Packet q;
      size_t u = 0;
      WHARF_FUZZ_CHECK(decode_packet(in.data(), cut, &q, &u) == DecodeStatus::kNeedMore,
                       "prefix not incomplete");
      const DecodeStatus hs = decode_headers(in.data(), cut, &q, &u);
      WHARF_FUZZ_CHECK(cut < headers ? hs == DecodeStatus::kNeedMore
                                     : hs == DecodeStatus::kOk && u == headers &&
                                           q.payload_len == p.payload_len && q.payload == nullptr,
                       "decode_headers of a prefix");
      WHARF_FUZZ_CHECK(packet_size(in.data(), cut) == (cut < kPacketHeaderSize ? 0 : used),
                       "packet_size of a prefix");
    }
  }
  const size_t whole = packet_size(in.data(), in.size());
  WHARF_FUZZ_CHECK(whole == 0 ? in.size() < kPacketHeaderSize
                              : whole >= kPacketHeaderSize && whole <= kMaxPacketSize,
                   "packet_size outside a packet's bounds");
  Hello theirs;
  if (decode(in.data(), in.size(), &theirs)) {
    WHARF_FUZZ_CHECK(in.size() == kHelloSize, "Hello size");
    uint16_t v = negotiate(Hello{}, theirs);
    WHARF_FUZZ_CHECK(v == 0 || (v >= kVersionMin && v <= kVersionMax && v >= theirs.version_min &&
                                v <= theirs.version_max),
                     "negotiated version outside the ranges");
  }
  return 0;
}
