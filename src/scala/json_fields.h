// Reading fields of JSON from outside (sweep files, the remote agent's messages): each helper
// throws std::runtime_error with the reason, which the caller turns into its error line.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace wharf::scala::json_fields {

using nlohmann::json;

[[noreturn]] inline void bad(const std::string& why) { throw std::runtime_error(why); }

inline const json& field(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key)) bad(std::string("missing \"") + key + "\"");
  return o.at(key);
}
inline std::string text(const json& o, const char* key) {
  const json& v = field(o, key);
  if (!v.is_string()) bad(std::string("\"") + key + "\" is not a string");
  return v.get<std::string>();
}
inline double number(const json& o, const char* key) {
  const json& v = field(o, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    bad(std::string("\"") + key + "\" is not a finite number >= 0");
  return v.get<double>();
}
// A count: a whole number in [0, limit] (read as a double: a cast of one beyond the target
// type's range would be undefined). limit 2^64: UINT64_MAX and above saturate, as the counts
// that were written saturated (Space::full_factorial).
inline uint64_t count(const json& o, const char* key, double limit) {
  const double v = number(o, key);
  if (v > limit || v != std::floor(v))
    bad(std::string("\"") + key + "\" is not a whole number up to " + std::to_string(limit));
  return v >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(v);
}
inline bool flag(const json& o, const char* key) {
  const json& v = field(o, key);
  if (!v.is_boolean()) bad(std::string("\"") + key + "\" is not true or false");
  return v.get<bool>();
}

}  // namespace wharf::scala::json_fields
