#include "control/units.h"

#include <cmath>
#include <utility>

namespace wharf::control {
namespace {

struct Unit {
  std::string_view name;
  double factor;
};

// Splits "2.5gbit" into 2.5 and "gbit"; false if the number is missing or malformed.
bool split_number(std::string_view text, double* value, std::string_view* unit, std::string* why) {
  size_t i = 0;
  if (!text.empty() && text[0] == '-') {
    *why = "'" + std::string(text) + "' is negative";
    return false;
  }
  double whole = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits)
    whole = whole * 10 + (text[i] - '0');
  if (i < text.size() && text[i] == '.') {
    double scale = 0.1;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits, scale /= 10)
      whole += (text[i] - '0') * scale;
  }
  if (digits == 0) {
    *why = "'" + std::string(text) + "' does not start with a number";
    return false;
  }
  *value = whole;
  *unit = text.substr(i);
  return true;
}

template <size_t N>
bool parse_with(std::string_view text, const Unit (&units)[N], const char* kind, uint64_t* out,
                std::string* why) {
  double value = 0;
  std::string_view unit;
  if (!split_number(text, &value, &unit, why)) return false;
  for (const Unit& u : units) {
    if (u.name != unit) continue;
    const double scaled = std::round(value * u.factor);
    if (!(scaled < 18446744073709551616.0)) {  // 2^64
      *why = "'" + std::string(text) + "' is too large";
      return false;
    }
    *out = static_cast<uint64_t>(scaled);
    return true;
  }
  *why = "'" + std::string(text) + "': unknown " + kind + " unit '" + std::string(unit) + "'";
  return false;
}

constexpr double kKi = 1024.0;

}  // namespace

bool parse_rate(std::string_view text, uint64_t* bps, std::string* why) {
  static const Unit kUnits[] = {
      {"", 1},
      {"bit", 1},
      {"kbit", 1e3},
      {"mbit", 1e6},
      {"gbit", 1e9},
      {"tbit", 1e12},
      {"kibit", kKi},
      {"mibit", kKi * kKi},
      {"gibit", kKi * kKi * kKi},
      {"tibit", kKi * kKi * kKi * kKi},
      {"bps", 8},
      {"kbps", 8e3},
      {"mbps", 8e6},
      {"gbps", 8e9},
      {"tbps", 8e12},
  };
  return parse_with(text, kUnits, "rate", bps, why);
}

bool parse_size(std::string_view text, uint64_t* bytes, std::string* why) {
  static const Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", kKi},
      {"kb", kKi},
      {"m", kKi * kKi},
      {"mb", kKi * kKi},
      {"g", kKi * kKi * kKi},
      {"gb", kKi * kKi * kKi},
      {"t", kKi * kKi * kKi * kKi},
      {"tb", kKi * kKi * kKi * kKi},
  };
  return parse_with(text, kUnits, "size", bytes, why);
}

std::string format_rate(uint64_t bps) {
  static const std::pair<uint64_t, const char*> kSteps[] = {
      {1000000000, "gbit"}, {1000000, "mbit"}, {1000, "kbit"}};
  for (const auto& [factor, name] : kSteps)
    if (bps != 0 && bps % factor == 0) return std::to_string(bps / factor) + name;
  return std::to_string(bps) + "bit";
}

}  // namespace wharf::control
