// The cluster text (links/cluster.h) of two hosts on loopback, for tests of the links between
// routers and of the engine above them.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/free_ports.h"

namespace wharf::test_support {

// Hosts a and b on 127.0.0.1, whose routers listen on port_a and port_b: a serves LIDs
// 1-1024 and 198.18.1.0/24, b LIDs 1025-2048 and 198.18.2.0/24. A host listens on its own
// line's port and dials the other's, so each host may be given its own text.
inline std::string cluster_text(int port_a, int port_b) {
  return "a 127.0.0.1 198.18.1.0/24 1-1024 " + std::to_string(port_a) +
         "\nb 127.0.0.1 198.18.2.0/24 1025-2048 " + std::to_string(port_b) + "\n";
}

// The cluster text of two hosts that reach each other directly, at two free ports.
inline std::string two_host_cluster() {
  const int port = free_ports(2);
  EXPECT_NE(port, 0) << "no free pair of ports";
  return cluster_text(port, port + 1);
}

}  // namespace wharf::test_support
