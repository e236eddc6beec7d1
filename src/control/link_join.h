// A router joining the cluster (issue #19; docs/OPERATIONS.md, "Joining with a join token"):
// with a one-time join token the operator made for its host (`wharfctl token add join host
// H`), it makes its own key, has the orchestrator's cluster CA sign a certificate for it
// (POST /v1/hosts/H/certificate, control/api.h) and receives a host token for its later
// registrations. What it receives is kept in a directory, so it joins once:
//   DIR/ca.pem      the cluster CA's certificate (peers are checked against it)
//   DIR/host.pem    this host's certificate          DIR/host.key   its key (0600)
//   DIR/host.token  the host token (0600)
#pragma once

#include <string>

#include "common/status.h"
#include "control/api_client.h"

namespace wharf::control {

struct LinkFiles {
  std::string ca, cert, key, token;
};
LinkFiles link_files(const std::string& dir);
// Whether DIR holds a CA, a certificate and its key (a router that joined before).
bool joined(const std::string& dir);

// Joins as host `host` with `join_token`, writing DIR's files (the directory is made 0700).
// kUnavailable when the orchestrator cannot be reached, kNotFound when it refused the token
// (unknown, used, expired, or for another host), else what went wrong.
Status join_cluster(const ApiEndpoint& api, const std::string& join_token, const std::string& host,
                    const std::string& dir);

}  // namespace wharf::control
