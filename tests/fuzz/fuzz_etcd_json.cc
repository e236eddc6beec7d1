// Fuzz target for control/etcd_json.h: the decoders face whatever answers as etcd on the network.
// Every decoder gets the whole input (seeds are real etcd 3.4 answers of each kind).
//
// Checked for every input: no decoder crashes, throws or reads outside the input; base64 text
// that decodes encodes back to exactly itself (only canonical text is accepted) and any bytes
// encoded decode back to themselves; an error body never decodes as success; accepted answers
// hold no negative revision, count or TTL and a positive lease ID; a range that decodes lists
// non-empty keys in strictly increasing order, a watch message events in revision order, with
// deletions carrying only key and revision; encoding an accepted range or watch message the way
// the gateway does decodes to the same result (differential against our reading of the format);
// failed decodes leave their vectors empty.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "control/etcd_json.h"
#include "fuzz_check.h"

using namespace wharf::control;
using namespace wharf::control::etcd_json;
using nlohmann::json;

namespace {

bool same(const KeyValue& a, const KeyValue& b) {
  return a.key == b.key && a.value == b.value && a.create_revision == b.create_revision &&
         a.mod_revision == b.mod_revision && a.version == b.version && a.lease == b.lease;
}

bool valid(const KeyValue& kv) {
  return !kv.key.empty() && kv.create_revision >= 0 && kv.mod_revision >= 0 && kv.version >= 0 &&
         kv.lease >= 0;
}

// mvccpb.KeyValue as the gateway writes it: bytes in base64, int64 as strings, defaults omitted.
json encode_kv(const KeyValue& kv) {
  json j = {{"key", base64_encode(kv.key)}};
  if (!kv.value.empty()) j["value"] = base64_encode(kv.value);
  if (kv.create_revision != 0) j["create_revision"] = std::to_string(kv.create_revision);
  if (kv.mod_revision != 0) j["mod_revision"] = std::to_string(kv.mod_revision);
  if (kv.version != 0) j["version"] = std::to_string(kv.version);
  if (kv.lease != 0) j["lease"] = std::to_string(kv.lease);
  return j;
}

void check_base64(std::string_view in) {
  std::string bytes;
  if (base64_decode(in, &bytes)) {
    WHARF_FUZZ_CHECK(base64_encode(bytes) == in, "accepted base64 is not canonical");
  }
  const std::string text = base64_encode(in);
  WHARF_FUZZ_CHECK(base64_decode(text, &bytes) && bytes == in, "base64 does not round-trip");
}

void check_range(std::string_view in) {
  std::vector<KeyValue> kvs;
  int64_t rev = -1;
  if (!decode_range(in, &kvs, &rev).is_ok()) {
    WHARF_FUZZ_CHECK(kvs.empty(), "failed range left entries");
    return;
  }
  WHARF_FUZZ_CHECK(rev >= 0, "negative revision");
  json again = {{"header", {{"revision", std::to_string(rev)}}}, {"kvs", json::array()}};
  for (size_t i = 0; i < kvs.size(); ++i) {
    WHARF_FUZZ_CHECK(valid(kvs[i]), "range entry");
    WHARF_FUZZ_CHECK(i == 0 || kvs[i - 1].key < kvs[i].key, "range keys not strictly increasing");
    again["kvs"].push_back(encode_kv(kvs[i]));
  }
  std::vector<KeyValue> kvs2;
  int64_t rev2 = -1;
  WHARF_FUZZ_CHECK(
      decode_range(again.dump(), &kvs2, &rev2).is_ok() && rev2 == rev && kvs2.size() == kvs.size(),
      "re-encoded range does not decode");
  for (size_t i = 0; i < kvs.size(); ++i) {
    WHARF_FUZZ_CHECK(same(kvs[i], kvs2[i]), "re-encoded range differs");
  }
}

void check_watch(std::string_view in) {
  WatchMessage msg;
  if (!decode_watch_message(in, &msg).is_ok()) {
    WHARF_FUZZ_CHECK(msg.events.empty(), "failed watch message left events");
    return;
  }
  WHARF_FUZZ_CHECK(msg.compact_revision >= 0, "negative compact revision");
  json result = {{"events", json::array()}};
  if (msg.created) result["created"] = true;
  if (msg.canceled) result["canceled"] = true;
  if (msg.compact_revision != 0) result["compact_revision"] = std::to_string(msg.compact_revision);
  if (!msg.cancel_reason.empty()) result["cancel_reason"] = msg.cancel_reason;
  for (size_t i = 0; i < msg.events.size(); ++i) {
    const WatchEvent& e = msg.events[i];
    WHARF_FUZZ_CHECK(valid(e.kv) && e.kv.mod_revision > 0, "watch event");
    WHARF_FUZZ_CHECK(i == 0 || msg.events[i - 1].kv.mod_revision <= e.kv.mod_revision,
                     "watch events out of revision order");
    json ev = {{"kv", encode_kv(e.kv)}};
    if (e.type == WatchEvent::Type::kDelete) {
      WHARF_FUZZ_CHECK(
          e.kv.value.empty() && e.kv.create_revision == 0 && e.kv.version == 0 && e.kv.lease == 0,
          "deletion carries more than key and revision");
      ev["type"] = "DELETE";
    }
    result["events"].push_back(std::move(ev));
  }
  WatchMessage msg2;
  WHARF_FUZZ_CHECK(decode_watch_message(json{{"result", result}}.dump(), &msg2).is_ok() &&
                       msg2.created == msg.created && msg2.canceled == msg.canceled &&
                       msg2.compact_revision == msg.compact_revision &&
                       msg2.cancel_reason == msg.cancel_reason &&
                       msg2.events.size() == msg.events.size(),
                   "re-encoded watch message does not decode");
  for (size_t i = 0; i < msg.events.size(); ++i) {
    WHARF_FUZZ_CHECK(
        msg2.events[i].type == msg.events[i].type && same(msg2.events[i].kv, msg.events[i].kv),
        "re-encoded watch event differs");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string copy(reinterpret_cast<const char*>(data), size);  // exactly sized
  const std::string_view in = copy;
  check_base64(in);
  wharf::Status error;
  if (decode_error(in, &error))
    WHARF_FUZZ_CHECK(!error.is_ok(), "an error body decoded as success");
  check_range(in);
  check_watch(in);
  int64_t rev = -1, deleted = -1, lease = -1, ttl = -1;
  bool succeeded = false;
  if (decode_header(in, &rev).is_ok()) WHARF_FUZZ_CHECK(rev >= 0, "negative header revision");
  if (decode_delete(in, &deleted, &rev).is_ok()) {
    WHARF_FUZZ_CHECK(deleted >= 0 && rev >= 0, "negative delete count or revision");
  }
  if (decode_txn(in, &succeeded, &rev).is_ok()) WHARF_FUZZ_CHECK(rev >= 0, "negative txn revision");
  if (decode_lease_grant(in, &lease).is_ok()) WHARF_FUZZ_CHECK(lease > 0, "lease ID not positive");
  if (decode_keep_alive(in, &ttl).is_ok()) WHARF_FUZZ_CHECK(ttl >= 0, "negative TTL");
  return 0;
}
