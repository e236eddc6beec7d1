// `wharfctl resource show` asks the router of this host (not the orchestrator) for its
// objects, as `rdma res show` asks the local kernel: one kDumpResources request on the
// router's socket, whose answer is JSON in a memfd (docs/wire-protocol.md).
#pragma once

#include <string>

namespace wharfctl {

// The router's JSON ({"qp": [...], "cq": [...], "mr": [...], "pd": [...]}), or false with
// *error saying why (no router there, not root, protocol error).
bool dump_router_resources(const std::string& socket_path, std::string* json, std::string* error);

}  // namespace wharfctl
