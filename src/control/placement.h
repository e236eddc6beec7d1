// A container's record at the orchestrator (issue #4), as the programs that start containers
// keep it: wharf-run, and wharf-cni for pods. The record holds the container's virtual IP in
// its tenant's network and the host it runs on; placing it creates it, or moves it to this
// host, and gives it a LID from this host's range. wharf-run's records outlive it (`wharfctl
// container del` removes them); wharf-cni releases a pod's when the pod goes.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "control/api_client.h"

namespace wharf::control {

struct Placement {
  ApiEndpoint orchestrator;  // checked by check_api_endpoint
  std::string token;         // presented to it (control/credentials.h); "" for none
  std::string tenant;
  std::string network;
  std::string name;
  std::string host;  // the router's host
  uint32_t vip = 0;  // wanted address (host order), 0: the orchestrator picks
};

// Creates or moves the record; on success stores its virtual IP in *vip and its LID in *lid,
// and whether this call created the record in *created (when given).
// A host's router registers with the orchestrator shortly after it starts, and only then
// has the orchestrator LIDs to give its containers: until it has (for up to 10 s), this
// asks again, then gives up with kExhausted. Otherwise the error says why: the
// orchestrator's refusal (an address outside the network, a name in another network...), or
// that it could not be reached (kUnavailable).
Status place_container(const Placement& p, uint32_t* vip, uint16_t* lid, bool* created = nullptr);

// The record of p's tenant and name: its address and host. kNotFound when there is none.
Status find_container(const Placement& p, uint32_t* vip, std::string* host);

// Deletes the record when it is p's (this host, and p.vip unless that is 0): a record the
// container has since been moved to another host with stays. OK when there is none.
Status release_container(const Placement& p);

}  // namespace wharf::control
