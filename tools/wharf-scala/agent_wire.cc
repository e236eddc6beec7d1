#include "agent_wire.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "scala/json_fields.h"

namespace wharf::scala::agent {
namespace {

using json_fields::bad;
using json_fields::count;
using json_fields::field;
using json_fields::flag;
using json_fields::number;
using json_fields::text;
using nlohmann::json;

// What a sweep can ask of one side (main.cc's bounds, the constraint model's memory budget).
constexpr double kMaxQps = 1u << 20;
constexpr double kMaxMrs = 1u << 16;
constexpr double kMaxMemory = 256.0 * 1024 * 1024;
constexpr double kMaxRules = 4096;
constexpr double kMaxSeconds = 60;

// One row per opcode and QP type: its name on the wire.
constexpr std::pair<Opcode, const char*> kOpcodes[] = {{Opcode::kSend, "send"},
                                                       {Opcode::kWrite, "write"},
                                                       {Opcode::kRead, "read"},
                                                       {Opcode::kAtomic, "atomic"}};
constexpr std::pair<ibv_qp_type, const char*> kQpTypes[] = {
    {IBV_QPT_RC, "rc"}, {IBV_QPT_UC, "uc"}, {IBV_QPT_UD, "ud"}};

template <class T, size_t N>
const char* name_of(const std::pair<T, const char*> (&table)[N], T v) {
  for (const auto& [value, name] : table)
    if (value == v) return name;
  return "?";
}
template <class T, size_t N>
T value_of(const std::pair<T, const char*> (&table)[N], const std::string& name, const char* what) {
  for (const auto& [value, n] : table)
    if (name == n) return value;
  bad(std::string("unknown ") + what + " \"" + name + "\"");
}

double seconds(const json& o, const char* key, double min) {
  const double v = number(o, key);
  if (v < min || v > kMaxSeconds)
    bad(std::string("\"") + key + "\" is not a time in [" + std::to_string(min) + ", 60] s");
  return v;
}

// Runs read(), turning its throw into false and *error.
template <class F>
bool reading(std::string* error, F&& read) {
  try {
    read();
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

}  // namespace

bool parse_body(std::string_view body, json* out, std::string* error) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "a message that is not a JSON object";
    return false;
  }
  *out = std::move(j);
  return true;
}

json point_to_json(const PointSpec& p, const RunOptions& o) {
  return {{"ql", p.ql},
          {"qr", p.qr},
          {"size", p.size},
          {"opcode", name_of(kOpcodes, p.opcode)},
          {"qp_type", name_of(kQpTypes, p.qp_type)},
          {"shared_cq", p.shared_cq},
          {"srq", p.srq},
          {"inline", p.inline_data},
          {"mrs", p.mrs},
          {"mr_size", p.mr_size},
          {"networks", p.networks},
          {"rules", p.rules},
          {"warmup_s", o.warmup_s},
          {"warmup_max_s", o.warmup_max_s},
          {"measure_s", o.measure_s},
          {"depth", o.depth},
          {"threads", o.threads},
          {"events", o.events}};
}

bool point_from_json(const json& j, PointSpec* spec, RunOptions* opts, std::string* error) {
  return reading(error, [&] {
    PointSpec p;
    p.ql = static_cast<uint32_t>(count(j, "ql", kMaxQps));
    p.qr = static_cast<uint32_t>(count(j, "qr", kMaxQps));
    if (p.ql == 0 || p.qr == 0) bad("\"ql\" and \"qr\" must be at least 1");
    p.size = static_cast<uint32_t>(count(j, "size", 0x1p31 - 1));
    p.opcode = value_of(kOpcodes, text(j, "opcode"), "opcode");
    p.qp_type = value_of(kQpTypes, text(j, "qp_type"), "QP type");
    p.shared_cq = flag(j, "shared_cq");
    p.srq = flag(j, "srq");
    p.inline_data = flag(j, "inline");
    p.mrs = static_cast<uint32_t>(count(j, "mrs", kMaxMrs));
    p.mr_size = count(j, "mr_size", kMaxMemory);
    if (p.mrs == 0 || p.mr_size < std::max<uint64_t>(p.size, 8) ||
        static_cast<double>(p.mrs) * static_cast<double>(p.mr_size) > kMaxMemory)
      bad("the MRs must hold a message and fit in 256 MiB");
    p.networks = static_cast<uint32_t>(count(j, "networks", 1));
    if (p.networks != 1) bad("\"networks\" must be 1 between hosts");
    p.rules = static_cast<uint32_t>(count(j, "rules", kMaxRules));
    RunOptions o;
    o.warmup_s = seconds(j, "warmup_s", 0);
    o.warmup_max_s = seconds(j, "warmup_max_s", o.warmup_s);
    o.measure_s = seconds(j, "measure_s", 0.001);
    o.depth = static_cast<uint32_t>(count(j, "depth", 4096));
    o.threads = static_cast<uint32_t>(count(j, "threads", 64));
    if (o.depth == 0 || o.threads == 0) bad("\"depth\" and \"threads\" must be at least 1");
    o.events = flag(j, "events");
    *spec = p;
    *opts = o;
  });
}

json info_to_json(const HalfInfo& h) {
  json mrs = json::array();
  for (const HalfInfo::Mr& m : h.mrs) mrs.push_back({m.addr, m.rkey});
  return {{"lid", h.lid}, {"gid", h.gid},          {"link_layer", h.link_layer},
          {"mtu", h.mtu}, {"mrs", std::move(mrs)}, {"qps", h.qps}};
}

bool info_from_json(const json& j, HalfInfo* info, std::string* error) {
  return reading(error, [&] {
    HalfInfo h;
    h.lid = static_cast<uint16_t>(count(j, "lid", 0xffff));
    const json& gid = field(j, "gid");
    if (!gid.is_array() || gid.size() != h.gid.size()) bad("\"gid\" is not 16 bytes");
    for (size_t i = 0; i < h.gid.size(); ++i) {
      if (!gid[i].is_number_unsigned() || gid[i].get<uint64_t>() > 255)
        bad("\"gid\" is not 16 bytes");
      h.gid[i] = static_cast<uint8_t>(gid[i].get<uint64_t>());
    }
    h.link_layer = static_cast<uint8_t>(count(j, "link_layer", 255));
    h.mtu = static_cast<uint8_t>(count(j, "mtu", IBV_MTU_4096));
    if (h.mtu < IBV_MTU_256) bad("\"mtu\" is not an IB MTU (1 .. 5)");
    const json& mrs = field(j, "mrs");
    if (!mrs.is_array() || mrs.size() > kMaxMrs) bad("\"mrs\" is not a list of MRs");
    for (const json& m : mrs) {
      if (!m.is_array() || m.size() != 2 || !m[0].is_number_unsigned() ||
          !m[1].is_number_unsigned() || m[1].get<uint64_t>() > UINT32_MAX)
        bad("an MR is not [address, rkey]");
      h.mrs.push_back({m[0].get<uint64_t>(), static_cast<uint32_t>(m[1].get<uint64_t>())});
    }
    const json& qps = field(j, "qps");
    if (!qps.is_array() || qps.size() > 2 * kMaxQps) bad("\"qps\" is not a list of QPNs");
    for (const json& q : qps) {
      if (!q.is_number_unsigned() || q.get<uint64_t>() > 0xffffff) bad("a QPN is not 24 bits");
      h.qps.push_back(static_cast<uint32_t>(q.get<uint64_t>()));
    }
    *info = std::move(h);
  });
}

json tally_to_json(const Tally& t) {
  json j = {{"bytes", t.bytes}, {"messages", t.messages}, {"error", t.error}};
  const size_t n = t.latencies.size();
  const size_t keep = std::min(n, kMaxTallyLatencies);
  json lat = json::array();
  for (size_t i = 0; i < keep; ++i) lat.push_back(t.latencies[i * n / keep]);  // evenly spread
  j["latencies"] = std::move(lat);
  j["weight"] = keep == 0 ? 1.0 : t.weight * static_cast<double>(n) / static_cast<double>(keep);
  return j;
}

bool tally_from_json(const json& j, Tally* out, std::string* error) {
  return reading(error, [&] {
    Tally t;
    t.bytes = count(j, "bytes", 0x1p64);
    t.messages = count(j, "messages", 0x1p64);
    t.error = clip(text(j, "error"), 1024);
    t.weight = number(j, "weight");
    if (t.weight < 1 || t.weight > 0x1p40) bad("\"weight\" is not in [1, 2^40]");
    const json& lat = field(j, "latencies");
    if (!lat.is_array() || lat.size() > kMaxTallyLatencies) bad("\"latencies\" is too long");
    t.latencies.reserve(lat.size());
    for (const json& v : lat) {
      if (!v.is_number_unsigned()) bad("a latency is not a whole number of ns");
      t.latencies.push_back(v.get<uint64_t>());
    }
    *out = std::move(t);
  });
}

Tally merge(const std::vector<Tally>& tallies) {
  Tally all;
  size_t total = 0;
  for (const Tally& t : tallies) {
    all.bytes += t.bytes;
    all.messages += t.messages;
    if (all.error.empty()) all.error = t.error;
    total += t.latencies.size();
  }
  const size_t keep = std::min(total, kMaxTallyLatencies);
  if (keep == 0) return all;
  all.latencies.reserve(keep);
  for (const Tally& t : tallies) {  // each thread's share, evenly spread over its samples
    const size_t n = t.latencies.size();
    const size_t share = n * keep / total;
    for (size_t i = 0; i < share; ++i) all.latencies.push_back(t.latencies[i * n / share]);
  }
  if (!all.latencies.empty())
    all.weight = static_cast<double>(total) / static_cast<double>(all.latencies.size());
  return all;
}

json greeting_to_json(const Greeting& g) {
  return {{"version", kVersion},
          {"device", g.device},
          {"max_qp_wr", g.max_qp_wr},
          {"no_rules", g.no_rules}};
}

bool greeting_from_json(const json& j, Greeting* out, std::string* error) {
  return reading(error, [&] {
    if (count(j, "version", 1u << 16) != kVersion) bad("another version of the protocol");
    Greeting g;
    g.device = clip(text(j, "device"), 256);
    g.max_qp_wr = static_cast<uint32_t>(count(j, "max_qp_wr", UINT32_MAX));
    if (g.max_qp_wr == 0) bad("\"max_qp_wr\" is 0");
    g.no_rules = clip(text(j, "no_rules"), 1024);
    *out = std::move(g);
  });
}

std::string clip(std::string text, size_t max) {
  if (text.size() <= max) return text;
  size_t n = max;
  while (n > 0 && (static_cast<uint8_t>(text[n]) & 0xc0) == 0x80) --n;  // inside a character
  text.resize(n);
  return text;
}

}  // namespace wharf::scala::agent
