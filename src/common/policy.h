// What an operator sets on a container (issue #4, "Policies"): object quotas in the manner of
// the rdma cgroup's hca_object, token-bucket rate limits, and a priority class. The control
// plane stores it in the container's record (control/policy_json.h); the router enforces it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace wharf {

// The objects a quota counts; kMrBytes is the registered length summed over the MRs.
enum class QuotaKind : uint8_t { kQp, kCq, kMr, kPd, kSrq, kMrBytes };
inline constexpr size_t kQuotaKinds = 6;
// Names in the API, wharfctl and logs, indexed by QuotaKind.
inline constexpr std::array<const char*, kQuotaKinds> kQuotaNames = {"qp", "cq",  "mr",
                                                                     "pd", "srq", "mr_bytes"};

struct ContainerPolicy {
  static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();
  static constexpr uint8_t kMaxPriority = 7;

  // Most objects (bytes for kMrBytes) the container may hold at once, over all its processes.
  std::array<uint64_t, kQuotaKinds> quota = {kUnlimited, kUnlimited, kUnlimited,
                                             kUnlimited, kUnlimited, kUnlimited};
  uint64_t rate_bps = 0;     // bits/s over all the container's QPs; 0: no limit
  uint64_t qp_rate_bps = 0;  // bits/s for each of its QPs; 0: no limit
  uint64_t burst_bytes = 0;  // bucket depth; 0: the router's default for the rate
  uint8_t priority = 0;      // 0 (best effort) .. 7

  uint64_t limit(QuotaKind k) const { return quota[static_cast<size_t>(k)]; }
  bool operator==(const ContainerPolicy&) const = default;
};

}  // namespace wharf
