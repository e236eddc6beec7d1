// What `wharfctl resource show` (and a test) asks the router of this host (not the
// orchestrator) for, as `rdma res show` asks the local kernel: its objects, in one
// kDumpResources request on the router's socket, whose answer is JSON in a memfd
// (docs/wire-protocol.md; router/resources.cc makes it).
#pragma once

#include <string>

namespace wharf::proto {

// The router's JSON ({"qp": [...], "cq": [...], "mr": [...], "pd": [...]}), or false with
// *error saying why (no router there, not root, protocol error).
bool dump_router_resources(const std::string& socket_path, std::string* json, std::string* error);

}  // namespace wharf::proto
