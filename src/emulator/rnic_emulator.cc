#include "emulator/rnic_emulator.h"

#include <bit>
#include <charconv>
#include <ctime>
#include <iterator>

namespace wharf::emulator {
namespace {

constexpr uint64_t kMaxEntries = 16u << 20;
constexpr uint64_t kMaxPenaltyNs = 1'000'000'000;

// "4096", "4k", "1M": sizes and counts with optional binary suffixes.
bool parse_quantity(std::string_view text, uint64_t* out) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K': scale = 1ULL << 10; break;
      case 'm':
      case 'M': scale = 1ULL << 20; break;
      case 'g':
      case 'G': scale = 1ULL << 30; break;
      default: break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v > UINT64_MAX / scale) return false;
  *out = v * scale;
  return true;
}

uint64_t page_tag(uint32_t key, uint64_t page) {
  uint64_t x = page ^ (static_cast<uint64_t>(key) * 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;  // splitmix64's finalizer
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void busy_wait(uint64_t ns, void*) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  const uint64_t until = static_cast<uint64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec + ns;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (static_cast<uint64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec >= until) return;
  }
}

// One row per key: where it goes, the values it may take (a number in [min, max], or only
// `word`, which stores 1), and the model it tunes (nullptr for a model's own key): a setting
// of a model that is not emulated is refused.
struct Key {
  const char* name;
  uint64_t EmulationConfig::*u64;
  uint32_t EmulationConfig::*u32;
  uint64_t min, max;
  bool power_of_two;
  const char* word;
  uint32_t EmulationConfig::*tunes;
};
constexpr Key kKeys[] = {
    {"qp_cache", nullptr, &EmulationConfig::qp_cache, 1, kMaxEntries, false, nullptr, nullptr},
    {"qp_miss_ns", &EmulationConfig::qp_miss_ns, nullptr, 0, kMaxPenaltyNs, false, nullptr,
     &EmulationConfig::qp_cache},
    {"mtt_cache", nullptr, &EmulationConfig::mtt_cache, 1, kMaxEntries, false, nullptr, nullptr},
    {"mtt_page", &EmulationConfig::mtt_page, nullptr, 256, 1ULL << 30, true, nullptr,
     &EmulationConfig::mtt_cache},
    {"mtt_miss_ns", &EmulationConfig::mtt_miss_ns, nullptr, 0, kMaxPenaltyNs, false, nullptr,
     &EmulationConfig::mtt_cache},
    {"match", nullptr, &EmulationConfig::match_sequential, 1, 1, false, "sequential", nullptr},
    {"match_ns", &EmulationConfig::match_ns, nullptr, 0, kMaxPenaltyNs, false, nullptr,
     &EmulationConfig::match_sequential},
};

// Reads the value of `key` from text; false if it is not one the key takes.
bool parse_value(const Key& key, std::string_view text, uint64_t* v) {
  if (key.word != nullptr) {
    *v = 1;
    return text == key.word;
  }
  return parse_quantity(text, v) && *v >= key.min && *v <= key.max &&
         (!key.power_of_two || std::has_single_bit(*v));
}

}  // namespace

bool parse_emulation(std::string_view spec, EmulationConfig* out, std::string* error) {
  EmulationConfig cfg;
  uint32_t seen = 0;  // bit i: kKeys[i] given
  for (bool more = !spec.empty(); more;) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    more = comma != std::string_view::npos;  // "a,": an empty last item, refused below
    spec = more ? spec.substr(comma + 1) : std::string_view();
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const Key* key = nullptr;
    for (const Key& k : kKeys)
      if (name == k.name) key = &k;
    if (key == nullptr || eq == std::string_view::npos) {
      *error = "--emulate: unknown setting '" + std::string(item) +
               "' (qp_cache, qp_miss_ns, mtt_cache, mtt_page, mtt_miss_ns, match, match_ns)";
      return false;
    }
    uint64_t v = 0;
    if (!parse_value(*key, item.substr(eq + 1), &v)) {
      *error = "--emulate: bad value in '" + std::string(item) + "' (" +
               (key->word != nullptr ? std::string(key->word)
                                     : std::to_string(key->min) + ".." + std::to_string(key->max)) +
               (key->power_of_two ? ", a power of two)" : ")");
      return false;
    }
    const auto bit = static_cast<uint32_t>(key - kKeys);
    if (seen & (1u << bit)) {
      *error = "--emulate: " + std::string(key->name) + " given twice";
      return false;
    }
    seen |= 1u << bit;
    if (key->u64 != nullptr)
      cfg.*(key->u64) = v;
    else
      cfg.*(key->u32) = static_cast<uint32_t>(v);
  }
  // A model's settings without the model would do nothing: say so rather than ignore them.
  for (size_t k = 0; k < std::size(kKeys); ++k)
    if ((seen & (1u << k)) != 0 && kKeys[k].tunes != nullptr && cfg.*(kKeys[k].tunes) == 0) {
      *error = "--emulate: " + std::string(kKeys[k].name) + " without " +
               (kKeys[k].tunes == &EmulationConfig::match_sequential ? "match" : "its cache");
      return false;
    }
  *out = cfg;
  return true;
}

std::string describe(const EmulationConfig& cfg) {
  std::string s;
  auto add = [&s](const char* k, uint64_t v) {
    s += (s.empty() ? "" : ",") + std::string(k) + "=" + std::to_string(v);
  };
  if (cfg.qp_cache != 0) {
    add("qp_cache", cfg.qp_cache);
    add("qp_miss_ns", cfg.qp_miss_ns);
  }
  if (cfg.mtt_cache != 0) {
    add("mtt_cache", cfg.mtt_cache);
    add("mtt_page", cfg.mtt_page);
    add("mtt_miss_ns", cfg.mtt_miss_ns);
  }
  if (cfg.match_sequential != 0) {
    s += std::string(s.empty() ? "" : ",") + "match=sequential";
    add("match_ns", cfg.match_ns);
  }
  return s.empty() ? "none" : s;
}

RnicEmulator::RnicEmulator(const EmulationConfig& cfg, Stall stall, void* arg)
    : cfg_(cfg),
      stall_(stall != nullptr ? stall : busy_wait),
      stall_arg_(arg),
      page_shift_(static_cast<uint32_t>(std::countr_zero(cfg.mtt_page))) {
  if (cfg.qp_cache != 0) qps_.emplace(cfg.qp_cache);
  if (cfg.mtt_cache != 0) pages_.emplace(cfg.mtt_cache);
}

void RnicEmulator::pay(uint64_t ns) {
  if (ns == 0) return;
  counters_.stalled_ns += ns;
  stall_(ns, stall_arg_);
}

void RnicEmulator::touch_qp_st(uint32_t qpn) {
  if (!qps_) return;
  if (qps_->touch(qpn)) {
    ++counters_.qp_hits;
    return;
  }
  ++counters_.qp_misses;
  pay(cfg_.qp_miss_ns);
}

void RnicEmulator::steer_to_qp_st(uint32_t qpn) {
  if (cfg_.match_sequential != 0) {
    ++counters_.match_lookups;
    counters_.match_rules_tried += match_rules_;
    pay(match_rules_ * cfg_.match_ns);
  }
  touch_qp_st(qpn);
}

void RnicEmulator::touch_memory_st(uint32_t key, uint64_t addr, uint64_t len) {
  if (!pages_ || len == 0) return;
  const uint64_t first = addr >> page_shift_;
  const uint64_t last = (addr + len - 1) >> page_shift_;
  uint64_t misses = 0;
  for (uint64_t page = first; page <= last; ++page) {
    // A translation entry belongs to one registration, as an RNIC's MTT is indexed per
    // memory key: the tag mixes the whole key and the whole page number (a 64-bit hash; two
    // entries share one with a chance of about 2^-64).
    if (pages_->touch(page_tag(key, page)))
      ++counters_.mtt_hits;
    else
      ++misses;
  }
  counters_.mtt_misses += misses;
  pay(misses * cfg_.mtt_miss_ns);
}

}  // namespace wharf::emulator
