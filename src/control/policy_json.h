// ContainerPolicy (common/policy.h) as JSON, the same shape in the store and the API:
//   {"quota": {"qp": 4, "mr_bytes": 1073741824, ...},      only the limited kinds
//    "ratelimit": {"rate": bit/s, "qp_rate": bit/s, "burst": bytes},   only the set ones
//    "priority": 0-7}
// A change request has the same shape; a key present replaces, null clears it (and
// "quota": null or "ratelimit": null clears the whole group); absent keys stay.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "common/policy.h"
#include "common/status.h"

namespace wharf::control {

// Adds the policy's keys to `object` (nothing for a policy that limits nothing).
void policy_to_json(const ContainerPolicy& p, nlohmann::json* object);
// Reads the policy keys of a stored record; false if any is malformed.
bool policy_from_json(const nlohmann::json& object, ContainerPolicy* out);
// Applies a change request; kInvalidArgument (saying which key) for unknown keys, negative or
// non-integer values, or a priority above 7. *p is unchanged on error.
Status apply_policy_change(const nlohmann::json& change, ContainerPolicy* p);

}  // namespace wharf::control
