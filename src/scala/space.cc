#include "scala/space.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

namespace wharf::scala {
namespace {

// Levels are exact in a double up to here.
constexpr uint64_t kMaxNumber = uint64_t{1} << 53;

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> items;
  for (size_t start = 0;;) {
    const size_t comma = s.find(',', start);
    items.push_back(trim(s.substr(start, comma - start)));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

// The shortest text for a generated level: 4096 -> "4k", 3 << 20 -> "3m", 48 -> "48".
std::string format_number(uint64_t n) {
  static constexpr std::pair<int, char> kSuffixes[] = {{30, 'g'}, {20, 'm'}, {10, 'k'}};
  for (const auto& [shift, suffix] : kSuffixes) {
    const uint64_t unit = uint64_t{1} << shift;
    if (n >= unit && n % unit == 0) return std::to_string(n / unit) + suffix;
  }
  return std::to_string(n);
}

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A numeric level: its value and its text.
struct Level {
  double value;
  std::string text;
};

// "LO..HI" of a numeric dimension: LO, 2*LO, 4*LO ... while at most HI, and HI itself.
bool expand_range(std::string_view lo_text, std::string_view hi_text, std::vector<Level>* out,
                  std::string* error) {
  double lo = 0;
  double hi = 0;
  if (!parse_number(lo_text, &lo) || !parse_number(hi_text, &hi))
    return fail(error, "malformed range \"" + std::string(lo_text) + ".." + std::string(hi_text) +
                           "\" (LO..HI, both numbers)");
  // From 0 doubling never grows.
  if (lo == 0) return fail(error, "a range must start above 0");
  if (lo > hi)
    return fail(error,
                "range " + std::string(lo_text) + ".." + std::string(hi_text) + " runs backwards");
  const auto top = static_cast<uint64_t>(hi);
  for (auto n = static_cast<uint64_t>(lo); n < top; n *= 2)
    out->push_back({static_cast<double>(n), format_number(n)});
  out->push_back({hi, format_number(top)});
  return true;
}

// A numeric dimension's new levels from RANGE, sorted by value, one per value (the first
// text given for it).
bool numeric_levels(std::string_view range, std::vector<Level>* out, std::string* error) {
  if (const size_t dots = range.find(".."); dots != std::string_view::npos) {
    if (!expand_range(trim(range.substr(0, dots)), trim(range.substr(dots + 2)), out, error))
      return false;
  } else {
    for (std::string_view item : split_commas(range)) {
      double value = 0;
      if (!parse_number(item, &value))
        return fail(error, "\"" + std::string(item) + "\" is not a number");
      out->push_back({value, std::string(item)});
    }
  }
  std::stable_sort(out->begin(), out->end(),
                   [](const Level& a, const Level& b) { return a.value < b.value; });
  out->erase(std::unique(out->begin(), out->end(),
                         [](const Level& a, const Level& b) { return a.value == b.value; }),
             out->end());
  return true;
}

// A choice dimension's new levels from RANGE, in the order given, each once.
bool choice_levels(std::string_view range, const std::vector<std::string>& known,
                   std::vector<std::string>* out, std::string* error) {
  if (range.find("..") != std::string_view::npos)
    return fail(error, "a range (LO..HI) needs a numeric dimension");
  for (std::string_view item : split_commas(range)) {
    if (std::find(known.begin(), known.end(), item) == known.end())
      return fail(error, "\"" + std::string(item) + "\" is not one of " + joined(known));
    if (std::find(out->begin(), out->end(), item) == out->end()) out->emplace_back(item);
  }
  return true;
}

}  // namespace

bool parse_number(std::string_view text, double* out) {
  size_t digits = 0;
  uint64_t value = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    value = value * 10 + static_cast<uint64_t>(text[digits] - '0');  // < 2^64: value <= 2^53
    if (value > kMaxNumber) return false;
  }
  if (digits == 0 || text.size() > digits + 1) return false;
  int shift = 0;
  if (text.size() == digits + 1) {
    switch (text[digits]) {
      case 'k':
      case 'K': shift = 10; break;
      case 'm':
      case 'M': shift = 20; break;
      case 'g':
      case 'G': shift = 30; break;
      default: return false;
    }
  }
  if (value > kMaxNumber >> shift) return false;
  *out = static_cast<double>(value << shift);
  return true;
}

Space::Space(std::vector<Dimension> dims) : dims_(std::move(dims)) {
  if (dims_.empty()) throw std::invalid_argument("a space needs at least one dimension");
  for (size_t i = 0; i < dims_.size(); ++i) {
    const Dimension& d = dims_[i];
    if (d.name.empty()) throw std::invalid_argument("a dimension needs a name");
    if (index_of(d.name) != static_cast<int>(i))
      throw std::invalid_argument("dimension \"" + d.name + "\" appears twice");
    if (d.levels.empty()) throw std::invalid_argument("dimension \"" + d.name + "\" has no levels");
    if (d.baseline >= d.levels.size())
      throw std::invalid_argument("dimension \"" + d.name + "\": baseline past its levels");
    if (d.numeric) {
      double previous = -1;
      for (const std::string& level : d.levels) {
        double value = 0;
        if (!parse_number(level, &value) || value <= previous)
          throw std::invalid_argument("dimension \"" + d.name +
                                      "\": levels must be increasing numbers");
        previous = value;
      }
    }
    known_choices_.push_back(d.numeric ? std::vector<std::string>{} : d.levels);
  }
}

int Space::index_of(std::string_view name) const {
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string_view Space::level(const Assignment& a, std::string_view name) const {
  const int d = index_of(name);
  if (d < 0 || static_cast<size_t>(d) >= a.size()) return {};
  const int l = a[static_cast<size_t>(d)];
  const std::vector<std::string>& levels = dims_[static_cast<size_t>(d)].levels;
  if (l < 0 || static_cast<size_t>(l) >= levels.size()) return {};
  return levels[static_cast<size_t>(l)];
}

double Space::number(const Assignment& a, std::string_view name) const {
  const int d = index_of(name);
  double value = 0;
  if (d < 0 || !dims_[static_cast<size_t>(d)].numeric || !parse_number(level(a, name), &value))
    return std::numeric_limits<double>::quiet_NaN();
  return value;
}

Assignment Space::baseline() const {
  Assignment a;
  for (const Dimension& d : dims_) a.push_back(static_cast<int>(d.baseline));
  return a;
}

uint64_t Space::full_factorial() const {
  uint64_t product = 1;
  for (const Dimension& d : dims_) {
    const uint64_t n = d.levels.size();
    product = product > UINT64_MAX / n ? UINT64_MAX : product * n;
  }
  return product;
}

bool Space::set_levels(std::string_view spec, std::string* error) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos)
    return fail(error, "\"" + std::string(spec) + "\" is not NAME=RANGE");
  const std::string_view name = trim(spec.substr(0, eq));
  const std::string_view range = trim(spec.substr(eq + 1));
  const int d = index_of(name);
  if (d < 0) return fail(error, "unknown dimension \"" + std::string(name) + "\"");
  Dimension& dim = dims_[static_cast<size_t>(d)];
  const std::string prefix = dim.name + ": ";
  if (range.empty()) return fail(error, prefix + "empty range");

  std::string why;
  std::vector<std::string> levels;
  size_t baseline = 0;
  if (dim.numeric) {
    std::vector<Level> numbers;
    if (!numeric_levels(range, &numbers, &why)) return fail(error, prefix + why);
    // The old baseline by value, so "4096" keeps a baseline of "4k". (Numeric levels parse:
    // the constructor and this function let no others in.)
    double old_baseline = 0;
    parse_number(dim.levels[dim.baseline], &old_baseline);
    for (Level& level : numbers) {
      if (level.value == old_baseline) baseline = levels.size();
      levels.push_back(std::move(level.text));
    }
  } else {
    if (!choice_levels(range, known_choices_[static_cast<size_t>(d)], &levels, &why))
      return fail(error, prefix + why);
    const auto old = std::find(levels.begin(), levels.end(), dim.levels[dim.baseline]);
    if (old != levels.end()) baseline = static_cast<size_t>(old - levels.begin());
  }
  dim.levels = std::move(levels);
  dim.baseline = baseline;
  return true;
}

Space default_space() {
  const std::vector<std::string> qps = {"1",  "2",  "4",  "8",   "16",  "32", "48",
                                        "64", "80", "96", "128", "192", "256"};
  return Space({
      {.name = "ql", .levels = qps, .numeric = true, .scale = true, .baseline = 2},
      {.name = "qr", .levels = qps, .numeric = true, .scale = true, .baseline = 2},
      {.name = "size", .levels = {"8", "64", "4k", "64k"}, .numeric = true, .baseline = 2},
      {.name = "opcode", .levels = {"send", "write", "read", "atomic"}, .baseline = 1},
      {.name = "qp_type", .levels = {"rc", "uc", "ud"}},
      {.name = "cq", .levels = {"shared", "per_qp"}},
      {.name = "srq", .levels = {"off", "on"}},
      {.name = "inline", .levels = {"off", "on"}},
      {.name = "mrs", .levels = {"1", "4", "16", "64"}, .numeric = true, .scale = true},
      {.name = "mr_size",
       .levels = {"4k", "64k", "1m", "4m", "16m"},
       .numeric = true,
       .scale = true,
       .baseline = 1},
      {.name = "networks", .levels = {"1", "10", "100", "1000"}, .numeric = true, .scale = true},
      {.name = "rules", .levels = {"0", "10", "100", "1000"}, .numeric = true, .scale = true},
  });
}

}  // namespace wharf::scala
