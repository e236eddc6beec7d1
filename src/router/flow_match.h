// Flow steering for RAW_PACKET QPs: which frames a flow rule (proto::FlowMatch) takes. Pure
// functions over a frame's first bytes, which come from another container and are hostile:
// every header is bounds-checked, and a frame too short for a layer simply lacks that layer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "proto/messages.h"

namespace wharf::router {

// The headers a rule can look at: Ethernet (one 802.1Q tag at most), IPv4 or IPv6, then TCP
// or UDP ports. Addresses as the frame holds them; numbers in host order.
struct FrameFields {
  std::array<uint8_t, 6> dst_mac{}, src_mac{};
  uint16_t ether_type = 0;  // after the VLAN tag, if there is one
  uint16_t vlan_tag = 0;    // 0 without a tag
  uint8_t ip_version = 0;   // 0: neither IPv4 nor IPv6 (or truncated)
  proto::Gid src_ip{}, dst_ip{};
  uint8_t ip_proto = 0, tclass = 0, hop_limit = 0;
  uint32_t flow_label = 0;
  uint8_t l4_proto = 0;  // IPPROTO_TCP or IPPROTO_UDP with ports read, else 0
  uint16_t src_port = 0, dst_port = 0;
};

// Bytes of a frame that parse_frame may look at; the rest is payload to every rule.
constexpr size_t kFrameHeaderBytes = 14 + 4 + 40 + 4;

// Reads what it can of frame[0, len). A frame shorter than an Ethernet header yields zeros.
FrameFields parse_frame(const uint8_t* frame, size_t len);

// Whether a frame with fields f matches m (see proto::FlowMatch).
bool flow_matches(const proto::FlowMatch& m, const FrameFields& f);

// The Toeplitz hash (Microsoft RSS) of a frame's fields that `hash_fields` names
// (IBV_RX_HASH_*: source and destination IPv4 or IPv6 address, then TCP or UDP port, each
// taken only if the frame has it), under a 40-byte key.
uint32_t rss_hash(const std::array<uint8_t, proto::kRssKeyLen>& key, uint64_t hash_fields,
                  const FrameFields& f);

// Whether m is a rule the router can apply: a known IP version and layer-4 protocol, and no
// IP or port fields without their layer.
bool valid_flow_match(const proto::FlowMatch& m);

}  // namespace wharf::router
