// wharf-run's side of the orchestrator (issue #4): the container's record in its tenant's
// virtual network, made on first start and moved to this host on later ones, so it keeps its
// virtual IP wherever it runs, and gets its LID from this host's range. The record outlives
// wharf-run (`wharfctl container del` removes it).
#pragma once

#include <cstdint>
#include <string>

#include "control/api_client.h"

namespace wharf::run {

struct Placement {
  control::ApiEndpoint orchestrator;  // checked by control::check_api_endpoint
  std::string token;                  // presented to it (control/credentials.h); "" for none
  std::string tenant;
  std::string network;
  std::string name;
  std::string host;  // the router's host
  uint32_t vip = 0;  // wanted address (host order), 0: the orchestrator picks
};

// Creates or moves the record; on success stores its virtual IP in *vip and its LID in *lid.
// A host's router registers with the orchestrator shortly after it starts, and only then
// has the orchestrator LIDs to give its containers: until it has (for up to 10 s), this
// asks again. Prints the orchestrator's refusal (or why it could not be reached) and returns
// false otherwise. The address must still fit the bridge's subnet (--bridge-ip, --prefix)
// like a --vip.
[[nodiscard]] bool place_container(const Placement& p, uint32_t* vip, uint16_t* lid);

}  // namespace wharf::run
