#include "rootfs_sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/failed_step.h"
#include "common/unique_fd.h"

namespace wharf::oci_hook {
namespace {

// What the kernel says the descriptor names, or "".
std::string path_of(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf));
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) return {};
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

int container_sysfs_class(const std::string& root, std::string* class_dir, std::string* why) {
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return failed_step(errno, why, "open the container's root " + root);
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  UniqueFd class_fd(
      static_cast<int>(::syscall(SYS_openat2, root_fd.get(), "sys/class", &how, sizeof(how))));
  if (!class_fd.valid())
    return failed_step(errno, why,
                       "reach sys/class under " + root + " without following a symlink");
  struct statfs fs {};
  if (::fstatfs(class_fd.get(), &fs) != 0) return failed_step(errno, why, "statfs its sys/class");
  if (fs.f_type != SYSFS_MAGIC)
    return failed_step(ENOTDIR, why,
                       "the container's sys/class is not on the sysfs its runtime mounted");
  const std::string root_path = path_of(root_fd.get());
  *class_dir = path_of(class_fd.get());
  if (root_path.empty() || *class_dir != (root_path == "/" ? "" : root_path) + "/sys/class")
    return failed_step(EXDEV, why, "the container's sys/class resolves to " + *class_dir);
  return 0;
}

}  // namespace wharf::oci_hook
