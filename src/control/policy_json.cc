#include "control/policy_json.h"

#include <nlohmann/json.hpp>
#include <string>

namespace wharf::control {
namespace {

using nlohmann::json;
using Code = Status::Code;

Status invalid(const std::string& what) { return Status::error(Code::kInvalidArgument, what); }

// A non-negative integer (null: `cleared`) for key `name`.
Status read_count(const json& v, const std::string& name, uint64_t cleared, uint64_t* out) {
  if (v.is_null()) {
    *out = cleared;
    return Status::ok();
  }
  // nlohmann keeps integers built in C++ (json{{"qp", 4}}) as signed, parsed ones as unsigned.
  if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)
    return invalid(name + " must not be negative");
  if (!v.is_number_integer()) return invalid(name + " must be a non-negative integer");
  *out = v.get<uint64_t>();
  return Status::ok();
}

// Applies the "quota", "ratelimit" and "priority" keys of j, ignoring any other.
Status apply_groups(const json& j, ContainerPolicy* p) {
  if (auto q = j.find("quota"); q != j.end()) {
    if (q->is_null()) {
      p->quota = ContainerPolicy{}.quota;
    } else if (!q->is_object()) {
      return invalid("quota must be an object");
    } else {
      for (const auto& [key, value] : q->items()) {
        size_t k = 0;
        while (k < kQuotaKinds && key != kQuotaNames[k]) ++k;
        if (k == kQuotaKinds)
          return invalid("unknown quota '" + key + "' (qp, cq, mr, pd, srq, mr_bytes)");
        Status st = read_count(value, "quota " + key, ContainerPolicy::kUnlimited, &p->quota[k]);
        if (!st.is_ok()) return st;
      }
    }
  }
  if (auto r = j.find("ratelimit"); r != j.end()) {
    if (r->is_null()) {
      p->rate_bps = p->qp_rate_bps = p->burst_bytes = 0;
    } else if (!r->is_object()) {
      return invalid("ratelimit must be an object");
    } else {
      for (const auto& [key, value] : r->items()) {
        uint64_t* field = key == "rate"      ? &p->rate_bps
                          : key == "qp_rate" ? &p->qp_rate_bps
                          : key == "burst"   ? &p->burst_bytes
                                             : nullptr;
        if (field == nullptr)
          return invalid("unknown ratelimit '" + key + "' (rate, qp_rate, burst)");
        Status st = read_count(value, key, 0, field);
        if (!st.is_ok()) return st;
      }
    }
  }
  if (auto pr = j.find("priority"); pr != j.end()) {
    uint64_t v = 0;
    Status st = read_count(*pr, "priority", 0, &v);
    if (!st.is_ok()) return st;
    if (v > ContainerPolicy::kMaxPriority) return invalid("priority must be 0-7");
    p->priority = static_cast<uint8_t>(v);
  }
  return Status::ok();
}

}  // namespace

void policy_to_json(const ContainerPolicy& p, json* object) {
  json quota = json::object();
  for (size_t k = 0; k < kQuotaKinds; ++k)
    if (p.quota[k] != ContainerPolicy::kUnlimited) quota[kQuotaNames[k]] = p.quota[k];
  if (!quota.empty()) (*object)["quota"] = quota;
  json rate = json::object();
  if (p.rate_bps != 0) rate["rate"] = p.rate_bps;
  if (p.qp_rate_bps != 0) rate["qp_rate"] = p.qp_rate_bps;
  if (p.burst_bytes != 0) rate["burst"] = p.burst_bytes;
  if (!rate.empty()) (*object)["ratelimit"] = rate;
  if (p.priority != 0) (*object)["priority"] = p.priority;
}

bool policy_from_json(const json& object, ContainerPolicy* out) {
  ContainerPolicy p;
  if (!object.is_object() || !apply_groups(object, &p).is_ok()) return false;
  *out = p;
  return true;
}

Status apply_policy_change(const json& change, ContainerPolicy* p) {
  if (!change.is_object()) return invalid("the policy change must be a JSON object");
  for (const auto& [key, value] : change.items())
    if (key != "quota" && key != "ratelimit" && key != "priority")
      return invalid("unknown policy key '" + key + "' (quota, ratelimit, priority)");
  ContainerPolicy next = *p;
  Status st = apply_groups(change, &next);
  if (st.is_ok()) *p = next;
  return st;
}

}  // namespace wharf::control
