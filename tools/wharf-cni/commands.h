// wharf-cni's commands (CNI spec 1.0, "Section 3"), each against the router named in the
// configuration:
//   ADD     holds a registration of the pod's network namespace for the sandbox (tenant,
//           network, name, vIP = the pod's IP) and passes prevResult on;
//   DEL     releases it; nothing to release (or no router, which holds nothing after it
//           stopped) is success, so DEL may be repeated;
//   CHECK   the router still holds the registration ADD made, for this namespace and address;
//   VERSION the versions wharf-cni speaks.
#pragma once

#include <string>

#include "cni_error.h"
#include "netconf.h"

namespace wharf::cni {

// What a command prints on stdout when it succeeds (may be empty), or its error.
struct Outcome {
  bool ok = true;
  std::string out;
  Error err;
};

Outcome add(const Invocation& inv, const NetConf& conf);
Outcome del(const Invocation& inv, const NetConf& conf);
Outcome check(const Invocation& inv, const NetConf& conf);
std::string version_json(const std::string& cni_version);

}  // namespace wharf::cni
