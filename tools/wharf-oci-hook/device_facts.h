// What libibverbs answers about wharf0 to the calling process, as the sysfs view must show it:
// run in a container's network namespace with Wharf's libibverbs (wharf-oci-hook makes sure
// of both), these are that container's facts, the ones its applications will be given.
#pragma once

#include <string>

#include "container/sysfs_tree.h"

namespace wharf::oci_hook {

// Fills *facts from ibv_query_device, ibv_query_port (port 1) and ibv_query_gid (index 0) of
// the device named wharf0, and the netdev from the interface holding the GID's IPv4 address.
// 0, or an errno with *why saying what failed.
int query_device_facts(container::DeviceFacts* facts, std::string* why);

}  // namespace wharf::oci_hook
