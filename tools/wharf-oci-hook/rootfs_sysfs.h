// The container's /sys/class as the hook reaches it before the runtime's pivot_root: under
// the root path of config.json, in a mount namespace where the host's tree is visible too. The
// image controls what lies under the root, so nothing there is followed: a /sys or /sys/class
// that is a symlink (to a host path) or not the sysfs the runtime mounted is refused.
#pragma once

#include <string>

namespace wharf::oci_hook {

// Sets *class_dir to <root>/sys/class as the kernel resolved it: reached without following a
// symlink, a directory of a sysfs mount. 0, or an errno with *why saying what was refused.
int container_sysfs_class(const std::string& root, std::string* class_dir, std::string* why);

}  // namespace wharf::oci_hook
