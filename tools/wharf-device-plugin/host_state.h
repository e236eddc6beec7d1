// The files wharf-device-plugin keeps on the host for the containers it allocates to, under
// its state directory:
//   dev/uverbs0, dev/rdma_cm  character devices numbered as container/device_view.h numbers
//                             them, mode 0666: the runtime makes the container's nodes from
//                             them, and lets the container open them;
//   sys/class/                the sysfs view of wharf0 (container/sysfs_tree.h) for a pod that
//                             is not registered yet: the router's node GUID and link layer, LID
//                             0, the zero GID, netdev eth0 (a pod's own GID and LID come with
//                             its registration, and libibverbs answers them from the router).
// Made at start over whatever an earlier run left; files are rewritten in place, so pods that
// run keep seeing them through their bind mounts.
#pragma once

#include <cstdint>
#include <string>

#include "allocation.h"

namespace wharf::device_plugin {

// Makes the files under `state_dir` (absolute; made if missing) for a router of `node_guid`
// and `link_layer`, and fills host's dev_dir, class_dir and class_dirs. Returns 0, or an
// errno with *step naming what failed.
int make_host_state(const std::string& state_dir, uint64_t node_guid, uint8_t link_layer,
                    HostLayout* host, std::string* step);

}  // namespace wharf::device_plugin
