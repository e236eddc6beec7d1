#include "control/etcd_json.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace wharf::control::etcd_json {
namespace {

using nlohmann::json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
// Server-chosen text copied into Status messages is cut to this and made printable.
constexpr size_t kMaxQuoted = 200;

Status malformed(const std::string& what) {
  return Status::error(Status::Code::kInternal, "malformed answer from etcd: " + what);
}

// `text` cut to kMaxQuoted bytes, anything but printable ASCII replaced, so that a hostile
// server cannot flood or forge log lines.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxQuoted)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > kMaxQuoted) out += "...";
  return out;
}

// Parses without exceptions; a discarded value stands for "not JSON". nlohmann's parser keeps
// its nesting stack on the heap, so deep nesting cannot overflow ours.
json parse(std::string_view text) { return json::parse(text.begin(), text.end(), nullptr, false); }

// The gRPC status codes etcd uses (google.golang.org/grpc/codes).
Status from_grpc_code(int64_t code, std::string_view message) {
  const std::string what = "etcd: " + printable(message);
  switch (code) {
    case 3: return Status::error(Status::Code::kInvalidArgument, what);  // INVALID_ARGUMENT
    case 5: return Status::error(Status::Code::kNotFound, what);         // NOT_FOUND
    case 11:  // OUT_OF_RANGE: compacted history, a future revision or a too large TTL
      return Status::error(message.find("compacted") != std::string_view::npos
                               ? Status::Code::kCompacted
                               : Status::Code::kInvalidArgument,
                           what);
    case 1:   // CANCELLED
    case 4:   // DEADLINE_EXCEEDED: etcd's request timeout, e.g. without a leader
    case 14:  // UNAVAILABLE
      return Status::error(Status::Code::kUnavailable, what);
    default:
      return Status::error(Status::Code::kInternal,
                           what + " (gRPC code " + std::to_string(code) + ")");
  }
}

// Field readers: an absent field reads as its default (the gateway omits defaults); a present
// field of the wrong type or out of range fails.
bool read_int64(const json& obj, const char* name, int64_t* out) {
  *out = 0;
  const auto it = obj.find(name);
  if (it == obj.end()) return true;
  if (it->is_number_integer() && !it->is_number_unsigned()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (!it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  // from_chars takes a '-' but no '+' or whitespace; the digits must be the whole string.
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Counts, revisions, versions, lease IDs and TTLs are never negative in etcd.
bool read_count(const json& obj, const char* name, int64_t* out) {
  return read_int64(obj, name, out) && *out >= 0;
}

bool read_bool(const json& obj, const char* name, bool* out) {
  *out = false;
  const auto it = obj.find(name);
  if (it == obj.end()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

bool read_string(const json& obj, const char* name, std::string* out) {
  out->clear();
  const auto it = obj.find(name);
  if (it == obj.end()) return true;
  if (!it->is_string()) return false;
  *out = it->get_ref<const std::string&>();
  return true;
}

bool read_bytes(const json& obj, const char* name, std::string* out) {
  std::string text;
  return read_string(obj, name, &text) && base64_decode(text, out);
}

// The response header's revision; every successful etcd answer carries a header.
bool read_revision(const json& obj, int64_t* revision) {
  const auto it = obj.find("header");
  return it != obj.end() && it->is_object() && read_count(*it, "revision", revision);
}

// mvccpb.KeyValue; etcd never stores an empty key.
bool read_key_value(const json& obj, KeyValue* kv) {
  return obj.is_object() && read_bytes(obj, "key", &kv->key) && !kv->key.empty() &&
         read_bytes(obj, "value", &kv->value) &&
         read_count(obj, "create_revision", &kv->create_revision) &&
         read_count(obj, "mod_revision", &kv->mod_revision) &&
         read_count(obj, "version", &kv->version) && read_count(obj, "lease", &kv->lease);
}

bool read_event(const json& obj, WatchEvent* ev) {
  std::string type;
  if (!obj.is_object() || !read_string(obj, "type", &type)) return false;
  if (type.empty() || type == "PUT") {
    ev->type = WatchEvent::Type::kPut;
  } else if (type == "DELETE") {
    ev->type = WatchEvent::Type::kDelete;
  } else {
    return false;
  }
  const auto it = obj.find("kv");
  if (it == obj.end() || !read_key_value(*it, &ev->kv) || ev->kv.mod_revision == 0) return false;
  if (ev->type == WatchEvent::Type::kDelete) ev->kv = {ev->kv.key, {}, 0, ev->kv.mod_revision};
  return true;
}

// etcd's error object for a failed unary call: {"error", "code", "message"}.
bool unary_error(const json& obj, Status* status) {
  int64_t code = 0;
  std::string message;
  if (!obj.is_object() || !read_int64(obj, "code", &code) || code == 0 ||
      !read_string(obj, "message", &message)) {
    return false;
  }
  *status = from_grpc_code(code, message);
  return true;
}

// A unary answer's top level: a JSON object.
bool parse_object(std::string_view body, json* out) {
  *out = parse(body);
  return out->is_object();
}

// A streaming call's message: the object under "result", or the in-stream error as a Status.
Status parse_stream_message(std::string_view line, json* result) {
  const json msg = parse(line);
  if (!msg.is_object()) return malformed("stream message is not a JSON object");
  // A request etcd refuses before the stream starts gets the unary error object instead.
  if (Status s; unary_error(msg, &s)) return s;
  if (const auto err = msg.find("error"); err != msg.end()) {
    int64_t code = 0;
    std::string message;
    if (!err->is_object() || !read_int64(*err, "grpc_code", &code) ||
        !read_string(*err, "message", &message)) {
      return malformed("stream error");
    }
    return code == 0 ? malformed("stream error without a code") : from_grpc_code(code, message);
  }
  const auto it = msg.find("result");
  if (it == msg.end() || !it->is_object()) return malformed("stream message without a result");
  *result = *it;
  return Status::ok();
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t j = 0; j < 3; ++j) {
      v = (v << 8) | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    }
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(v >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

bool base64_decode(std::string_view text, std::string* bytes) {
  bytes->clear();
  if (text.size() % 4 != 0) return false;
  size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  bytes->reserve(text.size() / 4 * 3);
  uint32_t v = 0;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    const char* at = std::find(kAlphabet, kAlphabet + 64, text[i]);
    if (at == kAlphabet + 64) return false;  // also a '=' before the padding
    v = (v << 6) | static_cast<uint32_t>(at - kAlphabet);
    if (i % 4 == 3) {
      bytes->push_back(static_cast<char>(v >> 16));
      bytes->push_back(static_cast<char>(v >> 8));
      bytes->push_back(static_cast<char>(v));
      v = 0;
    }
  }
  // The last group: 3 characters carry 2 bytes (2 bits unused), 2 carry 1 byte (4 unused).
  if (pad == 1) {
    if ((v & 0x3) != 0) return false;
    bytes->push_back(static_cast<char>(v >> 10));
    bytes->push_back(static_cast<char>(v >> 2));
  } else if (pad == 2) {
    if ((v & 0xf) != 0) return false;
    bytes->push_back(static_cast<char>(v >> 4));
  }
  return true;
}

bool decode_error(std::string_view body, Status* status) {
  return unary_error(parse(body), status);
}

Status decode_header(std::string_view body, int64_t* revision) {
  json obj;
  if (!parse_object(body, &obj) || !read_revision(obj, revision)) {
    return malformed("response without a header revision");
  }
  return Status::ok();
}

Status decode_range(std::string_view body, std::vector<KeyValue>* kvs, int64_t* revision) {
  kvs->clear();
  json obj;
  if (!parse_object(body, &obj) || !read_revision(obj, revision)) {
    return malformed("range response without a header revision");
  }
  std::vector<KeyValue> found;
  if (const auto it = obj.find("kvs"); it != obj.end()) {
    if (!it->is_array()) return malformed("range kvs is not an array");
    for (const json& e : *it) {
      KeyValue kv;
      if (!read_key_value(e, &kv)) return malformed("range entry");
      found.push_back(std::move(kv));
    }
  }
  // etcd sorts by key already; sorting again costs little and makes the contract ours.
  std::sort(found.begin(), found.end(),
            [](const KeyValue& a, const KeyValue& b) { return a.key < b.key; });
  const auto dup =
      std::adjacent_find(found.begin(), found.end(),
                         [](const KeyValue& a, const KeyValue& b) { return a.key == b.key; });
  if (dup != found.end()) return malformed("range lists a key twice");
  *kvs = std::move(found);
  return Status::ok();
}

Status decode_delete(std::string_view body, int64_t* deleted, int64_t* revision) {
  json obj;
  if (!parse_object(body, &obj) || !read_revision(obj, revision) ||
      !read_count(obj, "deleted", deleted)) {
    return malformed("deleterange response");
  }
  return Status::ok();
}

Status decode_txn(std::string_view body, bool* succeeded, int64_t* revision) {
  json obj;
  if (!parse_object(body, &obj) || !read_revision(obj, revision) ||
      !read_bool(obj, "succeeded", succeeded)) {
    return malformed("txn response");
  }
  return Status::ok();
}

Status decode_lease_grant(std::string_view body, int64_t* lease) {
  json obj;
  std::string error;
  if (!parse_object(body, &obj) || !read_count(obj, "ID", lease) ||
      !read_string(obj, "error", &error)) {
    return malformed("lease grant response");
  }
  if (!error.empty()) return Status::error(Status::Code::kInternal, "etcd: " + printable(error));
  if (*lease == 0) return malformed("lease grant response without an ID");
  return Status::ok();
}

Status decode_keep_alive(std::string_view body, int64_t* ttl) {
  json result;
  Status s = parse_stream_message(body.substr(0, body.find('\n')), &result);
  if (!s.is_ok()) return s;
  if (!read_count(result, "TTL", ttl)) return malformed("keepalive TTL");
  return Status::ok();
}

Status decode_watch_message(std::string_view line, WatchMessage* out) {
  *out = WatchMessage();
  json result;
  Status s = parse_stream_message(line, &result);
  if (!s.is_ok()) return s;
  if (!read_bool(result, "created", &out->created) ||
      !read_bool(result, "canceled", &out->canceled) ||
      !read_count(result, "compact_revision", &out->compact_revision) ||
      !read_string(result, "cancel_reason", &out->cancel_reason)) {
    *out = WatchMessage();
    return malformed("watch response");
  }
  out->cancel_reason = printable(out->cancel_reason);
  if (const auto it = result.find("events"); it != result.end()) {
    if (!it->is_array()) {
      *out = WatchMessage();
      return malformed("watch events is not an array");
    }
    for (const json& e : *it) {
      WatchEvent ev;
      if (!read_event(e, &ev) ||
          (!out->events.empty() && ev.kv.mod_revision < out->events.back().kv.mod_revision)) {
        *out = WatchMessage();
        return malformed("watch event");
      }
      out->events.push_back(std::move(ev));
    }
  }
  return Status::ok();
}

}  // namespace wharf::control::etcd_json
