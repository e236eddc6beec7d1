// A container's own view of the device files: a private mount namespace in which /dev and
// /sys look like the host's except that /dev/infiniband holds uverbs0 and rdma_cm and
// /sys/class holds the infiniband trees of sysfs_tree.h, and /sys is a sysfs of the
// container's network namespace (so /sys/class/net lists its interfaces, as under
// `ip netns exec`). The host's /dev and /sys are never written: new files live in tmpfs
// mounts of the container's namespace, and everything of the host's is bind-mounted in.
#pragma once

#include <string>
#include <vector>

#include "container/sysfs_tree.h"

namespace wharf::container {

// Character devices as the kernel numbers them; no driver answers them here (open gives
// ENXIO), they exist for the libraries that look for them before using the device.
constexpr unsigned kUverbsMajor = 231, kUverbsMinor = 192;
constexpr unsigned kRdmaCmMajor = 10, kRdmaCmMinor = 58;  // a misc device, minor dynamic

// For a single-threaded process (e.g. a child between fork and exec) already in the
// container's network namespace: unshares the mount namespace (mounts propagate from the
// host, never back) and builds the view. Returns 0, or an errno with *step naming what
// failed. `class_tree` comes from infiniband_class_tree().
int enter_device_view(const std::vector<SysfsEntry>& class_tree, std::string* step);

// Makes `class_dir` (a container's /sys/class) show `class_tree` (from infiniband_class_tree())
// in place of the host's own infiniband trees: a tmpfs mounted over it holds bind mounts of
// everything else it held and the tree's files, and is then made read-only (nodev, noexec,
// nosuid, as sysfs). For a process in the container's mount
// namespace (enter_device_view, and an OCI createContainer hook, which runs before the
// runtime's pivot_root and so passes the path under the container's root). Returns 0, or an
// errno with *step naming what failed.
int install_class_view(const std::string& class_dir, const std::vector<SysfsEntry>& class_tree,
                       std::string* step);

// Writes `tree` (from infiniband_class_tree()) under the existing directory `root`, as the
// container's /sys/class holds it. Entries already there are replaced in place (a file keeps
// its inode, so a bind mount of it shows the new contents); others are left alone. Returns 0,
// or an errno with *step naming what failed.
int write_sysfs_tree(const std::string& root, const std::vector<SysfsEntry>& tree,
                     std::string* step);

}  // namespace wharf::container
