// Fuzz target for control/units.h, control/policy_json.h and the record decoders of
// control/registry.h: rates and sizes typed into wharfctl, and policy change requests and
// stored records (containers, hosts) that reach the orchestrator and the routers as JSON. The
// whole input goes to each parser.
//
// Checked for every input: a rejected rate or size says why; an input of at most 15 digits is
// accepted as exactly that integer (differential against std::from_chars; beyond 2^53 the
// parsers are not exact); an accepted rate up to 2^53 formats to text that parses back to it.
// For input that parses as JSON: a refused change is kInvalidArgument with a message and leaves
// the policy untouched; an accepted one gives a priority of at most 7, round-trips through
// policy_to_json and policy_from_json, and applying it a second time changes nothing (a
// change only replaces or clears); policy_from_json accepts a record exactly when a change made
// of its policy keys applies to an empty policy, with the same result, and never writes *out
// when it refuses. An accepted container record has a LID of at most 0xbfff and the policy
// policy_from_json reads from it; an accepted host record a LID range inside 1-0xbfff and no
// subnet or one of /8 to /30.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "control/policy_json.h"
#include "control/registry.h"
#include "control/units.h"
#include "fuzz_check.h"

using namespace wharf::control;
using nlohmann::json;
using wharf::ContainerPolicy;
using wharf::Status;

namespace {

constexpr uint64_t kExactLimit = uint64_t{1} << 53;  // doubles hold every integer up to here

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

void check_units(const std::string& text) {
  uint64_t bps = 0, bytes = 0;
  std::string why;
  const bool rate_ok = parse_rate(text, &bps, &why);
  WHARF_FUZZ_CHECK(rate_ok || !why.empty(), "rate refused without a reason");
  why.clear();
  const bool size_ok = parse_size(text, &bytes, &why);
  WHARF_FUZZ_CHECK(size_ok || !why.empty(), "size refused without a reason");
  if (all_digits(text) && text.size() <= 15) {
    uint64_t n = 0;
    std::from_chars(text.data(), text.data() + text.size(), n);
    WHARF_FUZZ_CHECK(rate_ok && bps == n, "bare number is not bit/s");
    WHARF_FUZZ_CHECK(size_ok && bytes == n, "bare number is not bytes");
  }
  if (!text.empty() && text[0] == '-')
    WHARF_FUZZ_CHECK(!rate_ok && !size_ok, "negative number accepted");
  if (rate_ok && bps <= kExactLimit) {
    uint64_t back = 0;
    WHARF_FUZZ_CHECK(parse_rate(format_rate(bps), &back, &why) && back == bps,
                     "format_rate does not parse back");
  }
}

// A policy with something in every group, so that clearing and replacing both show.
ContainerPolicy start_policy() {
  ContainerPolicy p;
  p.quota[0] = 4;
  p.quota[5] = uint64_t{1} << 30;
  p.rate_bps = 1'000'000'000;
  p.burst_bytes = 65536;
  p.priority = 3;
  return p;
}

void check_round_trip(const ContainerPolicy& p) {
  WHARF_FUZZ_CHECK(p.priority <= ContainerPolicy::kMaxPriority, "priority above 7");
  json j = json::object();
  policy_to_json(p, &j);
  ContainerPolicy back;
  WHARF_FUZZ_CHECK(policy_from_json(j, &back) && back == p, "policy does not round-trip");
  ContainerPolicy again;
  WHARF_FUZZ_CHECK(policy_from_json(json::parse(j.dump()), &again) && again == p,
                   "policy does not round-trip through text");
}

void check_policy(const json& j) {
  const ContainerPolicy start = start_policy();
  ContainerPolicy p = start;
  Status st = apply_policy_change(j, &p);
  if (!st.is_ok()) {
    WHARF_FUZZ_CHECK(st.code() == Status::Code::kInvalidArgument, "refusal is not 400");
    WHARF_FUZZ_CHECK(!st.message().empty(), "refusal without a message");
    WHARF_FUZZ_CHECK(p == start, "refused change altered the policy");
  } else {
    check_round_trip(p);
    ContainerPolicy twice = p;
    WHARF_FUZZ_CHECK(apply_policy_change(j, &twice).is_ok() && twice == p,
                     "applying a change twice differs from once");
  }

  ContainerPolicy stored = start;
  const bool stored_ok = policy_from_json(j, &stored);
  if (!stored_ok) WHARF_FUZZ_CHECK(stored == start, "refused record wrote the policy");
  if (stored_ok) check_round_trip(stored);
  if (j.is_object()) {
    json change = json::object();
    for (const char* key : {"quota", "ratelimit", "priority"})
      if (auto it = j.find(key); it != j.end()) change[key] = *it;
    ContainerPolicy from_empty;
    const bool change_ok = apply_policy_change(change, &from_empty).is_ok();
    WHARF_FUZZ_CHECK(change_ok == stored_ok, "record and change disagree on validity");
    if (stored_ok) WHARF_FUZZ_CHECK(from_empty == stored, "record and change disagree");
  } else {
    WHARF_FUZZ_CHECK(!stored_ok, "a record that is not an object accepted");
  }
}

void check_records(const std::string& text) {
  ContainerInfo c;
  if (Registry::decode_container({"/wharf/container/t/a", text}, &c)) {
    WHARF_FUZZ_CHECK(c.tenant == "t" && c.name == "a", "container key misread");
    WHARF_FUZZ_CHECK(c.lid <= Registry::kMaxLid, "container LID beyond the unicast range");
    ContainerPolicy p;
    WHARF_FUZZ_CHECK(policy_from_json(json::parse(text), &p) && p == c.policy,
                     "container record's policy differs from policy_from_json's");
  }
  HostInfo h;
  if (Registry::decode_host({"/wharf/host/h1", text}, &h)) {
    WHARF_FUZZ_CHECK(h.name == "h1", "host key misread");
    WHARF_FUZZ_CHECK(
        h.lid_first >= 1 && h.lid_first <= h.lid_last && h.lid_last <= Registry::kMaxLid,
        "host LID range accepted out of bounds");
    WHARF_FUZZ_CHECK(h.subnet.prefix == 0 || (h.subnet.prefix >= 8 && h.subnet.prefix <= 30),
                     "host subnet accepted with a prefix outside /8-/30");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_units(text);
  const json j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) check_policy(j);
  check_records(text);
  return 0;
}
