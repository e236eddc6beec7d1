// The messages between `wharf-scala sweep` and `wharf-scala serve` (the remote half of every
// point, on another host): frames of a 4-byte big-endian length and that many bytes of one
// JSON object. docs/OPERATIONS.md ("wharf-scala between two hosts") lists the exchange.
//
// Everything read from the connection is hostile: the decoders take only well-formed objects
// whose numbers are in the ranges a sweep can ask for, so a peer cannot make the agent build
// more than a sweep could (at most 2^20 QP pairs each way, so 2^21 QPs a side; 256 MiB of
// registrations; 4,096 rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine.h"
#include "half.h"

namespace wharf::scala::agent {

inline constexpr int kVersion = 1;
inline constexpr size_t kMaxFrame = 64u << 20;
// The most latencies a tally carries: a uniform sample of the rest, weighted.
inline constexpr size_t kMaxTallyLatencies = 1u << 20;

// A frame's body: one JSON object; false and *error for anything else.
bool parse_body(std::string_view body, nlohmann::json* out, std::string* error);

nlohmann::json point_to_json(const PointSpec& spec, const RunOptions& opts);
bool point_from_json(const nlohmann::json& j, PointSpec* spec, RunOptions* opts,
                     std::string* error);

nlohmann::json info_to_json(const HalfInfo& info);
bool info_from_json(const nlohmann::json& j, HalfInfo* info, std::string* error);

// A tally, its latencies sampled down to kMaxTallyLatencies (the weight says how many each
// stands for).
nlohmann::json tally_to_json(const Tally& t);
bool tally_from_json(const nlohmann::json& j, Tally* t, std::string* error);

// Several threads' tallies as one, their latencies sampled down to kMaxTallyLatencies in
// proportion to each thread's (the weight says how many each stands for).
Tally merge(const std::vector<Tally>& tallies);

// The agent's greeting: who it is.
struct Greeting {
  std::string device;
  uint32_t max_qp_wr = 0;
  std::string no_rules;  // "" when its device steers flows, else why not
};
nlohmann::json greeting_to_json(const Greeting& g);
bool greeting_from_json(const nlohmann::json& j, Greeting* g, std::string* error);

// Text from the other side, cut to at most `max` bytes on a UTF-8 character's boundary (a
// JSON writer refuses half a character).
std::string clip(std::string text, size_t max);

}  // namespace wharf::scala::agent
