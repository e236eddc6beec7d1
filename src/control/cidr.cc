#include "control/cidr.h"

#include <charconv>

namespace wharf::control {
namespace {

// A decimal number of at most `max`, all of `text`, no sign or leading zero.
bool parse_small(std::string_view text, uint32_t max, uint32_t* out) {
  if (text.empty() || text.size() > 3 || (text.size() > 1 && text[0] == '0')) return false;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

bool parse_ipv4(std::string_view text, uint32_t* out) {
  uint32_t ip = 0;
  for (int part = 0; part < 4; ++part) {
    const size_t dot = part < 3 ? text.find('.') : text.size();
    if (dot == std::string_view::npos) return false;
    uint32_t v = 0;
    if (!parse_small(text.substr(0, dot), 255, &v)) return false;
    ip = ip << 8 | v;
    text = part < 3 ? text.substr(dot + 1) : std::string_view();
  }
  *out = ip;
  return true;
}

bool parse_cidr(std::string_view text, Cidr* out) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return false;
  Cidr c;
  uint32_t prefix = 0;
  if (!parse_ipv4(text.substr(0, slash), &c.base) ||
      !parse_small(text.substr(slash + 1), 32, &prefix))
    return false;
  c.prefix = static_cast<int>(prefix);
  if ((c.base & ~c.mask()) != 0) return false;
  *out = c;
  return true;
}

std::string format_cidr(const Cidr& c) {
  return format_ipv4(c.base) + "/" + std::to_string(c.prefix);
}

bool overlaps(const Cidr& a, const Cidr& b) {
  const Cidr& wider = a.prefix <= b.prefix ? a : b;
  const Cidr& narrower = a.prefix <= b.prefix ? b : a;
  return wider.contains(narrower.base);
}

}  // namespace wharf::control
