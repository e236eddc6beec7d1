#include "host_state.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "common/failed_step.h"
#include "container/device_view.h"
#include "container/sysfs_tree.h"

namespace wharf::device_plugin {
namespace {

constexpr const char* kPodNetdev = "eth0";

int make_directories(const std::string& path, std::string* step) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  return ec ? failed_step(ec.value(), step, "mkdir " + path) : 0;
}

// A fresh node: one an earlier run left may have other numbers or another mode.
int make_char_device(const std::string& path, unsigned major, unsigned minor, std::string* step) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return failed_step(errno, step, "unlink " + path);
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major, minor)) != 0)
    return failed_step(errno, step, "mknod " + path);
  if (::chmod(path.c_str(), 0666) != 0) return failed_step(errno, step, "chmod " + path);  // umask
  return 0;
}

}  // namespace

int make_host_state(const std::string& state_dir, uint64_t node_guid, uint8_t link_layer,
                    HostLayout* host, std::string* step) {
  host->dev_dir = state_dir + "/dev";
  host->class_dir = state_dir + "/sys/class";
  if (int err = make_directories(host->dev_dir, step); err != 0) return err;
  if (int err = make_directories(host->class_dir, step); err != 0) return err;
  if (int err = make_char_device(host->dev_dir + "/" + std::string(kUverbsNode),
                                 container::kUverbsMajor, container::kUverbsMinor, step);
      err != 0)
    return err;
  if (int err = make_char_device(host->dev_dir + "/" + std::string(kRdmaCmNode),
                                 container::kRdmaCmMajor, container::kRdmaCmMinor, step);
      err != 0)
    return err;

  container::DeviceFacts facts;
  facts.node_guid = node_guid;
  facts.link_layer = link_layer;
  facts.netdev = kPodNetdev;
  const std::vector<container::SysfsEntry> tree = container::infiniband_class_tree(facts);
  if (int err = container::write_sysfs_tree(host->class_dir, tree, step); err != 0) return err;
  host->class_dirs.clear();
  for (const container::SysfsEntry& e : tree) {
    if (e.kind == container::SysfsEntry::Kind::kDir && e.path.find('/') == std::string::npos)
      host->class_dirs.push_back(e.path);
  }
  return 0;
}

}  // namespace wharf::device_plugin
