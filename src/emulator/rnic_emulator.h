// The RNIC emulator (issue #21; wharfd --emulate): models the parts of an RNIC's
// micro-architecture that ScalaCN and "RDMA over Commodity Ethernet at Scale" blame for
// scalability walls, so wharf-scala can be checked against walls known to exist and users can
// rehearse a given RNIC's behaviour:
//
//   qp_cache=N     an N-entry QP-context cache: each time the data path needs a QP's context
//                  (a work request starts, a packet arrives for it) and the QP is not among the
//                  N most recently used, it pays qp_miss_ns (default 10 us).
//   mtt_cache=N    an N-entry memory-translation cache of mtt_page-byte pages (default 4k):
//                  each page of registered memory a transfer touches (local SGEs, the remote
//                  target of a WRITE, READ or atomic) that is not cached pays mtt_miss_ns
//                  (default 10 us) - the "slow receiver" of the RoCE-at-scale paper.
//   match=sequential  match-action lookups that try the router's rules one after another, as
//                  an eSwitch does with one mask per rule: each message or packet steered to
//                  a QP pays match_ns (default 100 ns) for every rule the router holds - one
//                  per registered container (its address in its tenant network) and one per
//                  flow-steering rule (ibv_create_flow) - so the cost grows with networks and
//                  policy rules, ScalaCN's containers-per-host wall.
//
// A penalty stalls the router's data-path thread, as a miss stalls an RNIC's pipeline: the
// work behind it waits too. The penalties are scaled to the software router: a miss costs a
// real RNIC a PCIe round trip (about 1 us), 10-20 times the time it spends on a packet (50-100
// ns); the router spends about 0.5-1 us on one, so the same ratio makes a miss of either
// cache 10 us, and a rule tried (a few ns in an eSwitch) 100 ns. The emulator lives on the
// data-path thread only (`_st` callers); its hot calls do not allocate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "emulator/lru_set.h"

namespace wharf::emulator {

struct EmulationConfig {
  uint32_t qp_cache = 0;  // entries; 0: not emulated
  uint64_t qp_miss_ns = 10000;
  uint32_t mtt_cache = 0;  // entries; 0: not emulated
  uint64_t mtt_page = 4096;
  uint64_t mtt_miss_ns = 10000;
  uint32_t match_sequential = 0;  // 1: match=sequential; 0: lookups cost nothing extra
  uint64_t match_ns = 100;

  bool enabled() const { return qp_cache != 0 || mtt_cache != 0 || match_sequential != 0; }
};

// Parses "KEY=VALUE,..." (keys above; match takes only "sequential"; sizes take k/m/g suffixes,
// powers of 1024; mtt_page a power of two from 256 bytes to 1 GiB; caches at most 16M entries;
// penalties at most 1 s in ns). A setting given twice, or a setting of a cache or of match without
// it, is refused. On bad input returns false with one line in *error. "" is valid and enables
// nothing.
bool parse_emulation(std::string_view spec, EmulationConfig* out, std::string* error);
// The spec in canonical form ("qp_cache=64,qp_miss_ns=10000"), for the router's log.
std::string describe(const EmulationConfig& cfg);

struct EmulatorCounters {
  uint64_t qp_hits = 0, qp_misses = 0;
  uint64_t mtt_hits = 0, mtt_misses = 0;
  uint64_t match_lookups = 0, match_rules_tried = 0;
  uint64_t stalled_ns = 0;  // penalties paid
};

class RnicEmulator {
 public:
  // How a penalty is paid: the default busy-waits on the monotonic clock; tests record.
  using Stall = void (*)(uint64_t ns, void* arg);

  explicit RnicEmulator(const EmulationConfig& cfg, Stall stall = nullptr, void* arg = nullptr);

  // QP `qpn`'s context is needed (a work request of it starts).
  void touch_qp_st(uint32_t qpn);
  // A message or packet is steered to QP `qpn`: the match rules are tried, then its context
  // is needed.
  void steer_to_qp_st(uint32_t qpn);
  // The rules a lookup tries with match=sequential (the router keeps it current).
  void set_match_rules_st(uint32_t rules) { match_rules_ = rules; }
  // [addr, addr + len) of the registration with key `key` is translated (len 0: nothing).
  void touch_memory_st(uint32_t key, uint64_t addr, uint64_t len);

  const EmulationConfig& config() const { return cfg_; }
  const EmulatorCounters& counters() const { return counters_; }

 private:
  void pay(uint64_t ns);

  EmulationConfig cfg_;
  Stall stall_;
  void* stall_arg_;
  std::optional<LruSet> qps_;
  std::optional<LruSet> pages_;
  uint32_t page_shift_;
  uint32_t match_rules_ = 0;
  EmulatorCounters counters_;
};

}  // namespace wharf::emulator
