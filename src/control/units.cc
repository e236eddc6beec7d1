#include "control/units.h"

#include <cmath>
#include <limits>
#include <utility>

namespace wharf::control {
namespace {

struct Unit {
  std::string_view name;  // lower case; units are matched without regard to case, as tc does
  uint64_t factor;
};

// A number as written: its whole part exactly, its fraction approximately.
struct Number {
  unsigned __int128 whole = 0;  // saturates well above 2^64 (then "too large")
  double fraction = 0;          // [0, 1)
};

// Splits "2.5gbit" into 2 + 0.5 and "gbit"; false if the number is missing or malformed.
bool split_number(std::string_view text, Number* n, std::string_view* unit, std::string* why) {
  if (!text.empty() && text[0] == '-') {
    *why = "'" + std::string(text) + "' is negative";
    return false;
  }
  constexpr unsigned __int128 kCap = static_cast<unsigned __int128>(1) << 80;
  size_t i = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits)
    if (n->whole < kCap) n->whole = n->whole * 10 + static_cast<unsigned>(text[i] - '0');
  if (i < text.size() && text[i] == '.') {
    double scale = 0.1;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits, scale /= 10)
      n->fraction += (text[i] - '0') * scale;
  }
  if (digits == 0) {
    *why = "'" + std::string(text) + "' does not start with a number";
    return false;
  }
  *unit = text.substr(i);
  return true;
}

bool same_ignoring_case(std::string_view lower, std::string_view s) {
  if (lower.size() != s.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = (s[i] >= 'A' && s[i] <= 'Z') ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (c != lower[i]) return false;
  }
  return true;
}

template <size_t N>
bool parse_with(std::string_view text, const Unit (&units)[N], const char* kind, uint64_t* out,
                std::string* why) {
  Number n;
  std::string_view unit;
  if (!split_number(text, &n, &unit, why)) return false;
  for (const Unit& u : units) {
    if (!same_ignoring_case(u.name, unit)) continue;
    const unsigned __int128 total =
        n.whole * u.factor +
        static_cast<unsigned __int128>(std::llround(n.fraction * static_cast<double>(u.factor)));
    if (n.whole > std::numeric_limits<uint64_t>::max() ||
        total > std::numeric_limits<uint64_t>::max()) {
      *why = "'" + std::string(text) + "' is too large";
      return false;
    }
    *out = static_cast<uint64_t>(total);
    return true;
  }
  *why = "'" + std::string(text) + "': unknown " + kind + " unit '" + std::string(unit) + "'";
  return false;
}

constexpr uint64_t kKi = 1024;

}  // namespace

bool parse_rate(std::string_view text, uint64_t* bps, std::string* why) {
  static const Unit kUnits[] = {
      {"", 1},
      {"bit", 1},
      {"kbit", 1000},
      {"mbit", 1000'000},
      {"gbit", 1000'000'000},
      {"tbit", 1000'000'000'000},
      {"kibit", kKi},
      {"mibit", kKi * kKi},
      {"gibit", kKi * kKi * kKi},
      {"tibit", kKi * kKi * kKi * kKi},
      {"bps", 8},
      {"kbps", 8'000},
      {"mbps", 8'000'000},
      {"gbps", 8'000'000'000},
      {"tbps", 8'000'000'000'000},
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
