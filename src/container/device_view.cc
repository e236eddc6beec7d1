#include "container/device_view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/failed_step.h"
#include "common/unique_fd.h"

namespace wharf::container {
namespace {

struct DirEntry {
  std::string name;
  unsigned char type;
};

int list_dir(const std::string& path, std::vector<DirEntry>* out) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return errno;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out->push_back({n, e->d_type});
  }
  ::closedir(d);
  return 0;
}

// The path through which a bind mount reaches `name` under a directory that has since been
// mounted over: the O_PATH descriptor still names the old directory.
std::string under_fd(int dir_fd, const std::string& name) {
  return "/proc/self/fd/" + std::to_string(dir_fd) + (name.empty() ? "" : "/" + name);
}

// The mounts directly below /sys (e.g. /sys/fs/cgroup): a fresh sysfs would hide them, so
// they are bound in again (with whatever is mounted below them).
std::vector<std::string> top_mounts_below(const std::string& root) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, fsroot, point;
    fields >> id >> parent >> devno >> fsroot >> point;
    if (point.compare(0, root.size() + 1, root + "/") != 0) continue;
    if (point.find('\\') != std::string::npos) continue;  // an escaped name: not ours to keep
    found.push_back(point);
  }
  std::vector<std::string> top;
  for (const auto& p : found) {
    bool nested = false;
    for (const auto& q : found) nested |= q != p && p.compare(0, q.size() + 1, q + "/") == 0;
    bool seen = false;
    for (const auto& t : top) seen |= t == p;
    if (!nested && !seen) top.push_back(p);
  }
  return top;
}

// A fresh sysfs on /sys (it shows the caller's network namespace), the old submounts kept.
int remount_sys(std::string* step) {
  std::vector<std::pair<std::string, UniqueFd>> keep;
  for (auto& p : top_mounts_below("/sys")) {
    UniqueFd fd(::open(p.c_str(), O_PATH | O_CLOEXEC));
    if (fd.valid()) keep.emplace_back(p, std::move(fd));
  }
  if (::mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return failed_step(errno, step, "mount sysfs on /sys");
  for (auto& [point, fd] : keep) {
    // A mount point the new sysfs lacks (not a sysfs directory) cannot come back.
    if (::mount(under_fd(fd.get(), "").c_str(), point.c_str(), nullptr, MS_BIND | MS_REC,
                nullptr) != 0 &&
        errno != ENOENT)
      return failed_step(errno, step, "bind " + point);
  }
  return 0;
}

// Mounts a tmpfs over `dir` and binds every entry of the old directory but those in `leave_out`
// into it (symlinks are copied), so `dir` looks the same but new entries can be made in it.
int make_writable_copy(const std::string& dir, const std::vector<std::string>& leave_out,
                       std::string* step) {
  std::vector<DirEntry> entries;
  if (int err = list_dir(dir, &entries); err != 0) return failed_step(err, step, "list " + dir);
  UniqueFd old(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!old.valid()) return failed_step(errno, step, "open " + dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID, "mode=0755") != 0)
    return failed_step(errno, step, "mount tmpfs on " + dir);
  for (const auto& e : entries) {
    bool skip = false;
    for (const auto& l : leave_out) skip |= l == e.name;
    if (skip) continue;
    const std::string to = dir + "/" + e.name;
    const std::string from = under_fd(old.get(), e.name);
    struct stat st {};
    if (::fstatat(old.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = ::readlinkat(old.get(), e.name.c_str(), target, sizeof(target) - 1);
      if (n < 0) return failed_step(errno, step, "readlink " + to);
      target[n] = '\0';
      if (::symlink(target, to.c_str()) != 0) return failed_step(errno, step, "symlink " + to);
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (::mkdir(to.c_str(), st.st_mode & 07777) != 0)
        return failed_step(errno, step, "mkdir " + to);
    } else {
      UniqueFd f(::open(to.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
      if (!f.valid()) return failed_step(errno, step, "create " + to);
    }
    if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
      return failed_step(errno, step, "bind " + to);
  }
  return 0;
}

int make_char_device(const std::string& path, unsigned major, unsigned minor, std::string* step) {
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major, minor)) != 0)
    return failed_step(errno, step, "mknod " + path);
  ::chmod(path.c_str(), 0666);  // past the umask
  return 0;
}

}  // namespace

int write_sysfs_tree(const std::string& root, const std::vector<SysfsEntry>& tree,
                     std::string* step) {
  for (const auto& e : tree) {
    const std::string path = root + "/" + e.path;
    switch (e.kind) {
      case SysfsEntry::Kind::kDir:
        if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
          return failed_step(errno, step, "mkdir " + path);
        break;
      case SysfsEntry::Kind::kSymlink:
        if (::symlink(e.content.c_str(), path.c_str()) != 0 &&
            (errno != EEXIST || ::unlink(path.c_str()) != 0 ||
             ::symlink(e.content.c_str(), path.c_str()) != 0))
          return failed_step(errno, step, "symlink " + path);
        break;
      case SysfsEntry::Kind::kFile: {
        UniqueFd f(
            ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
        if (!f.valid()) return failed_step(errno, step, "create " + path);
        if (::write(f.get(), e.content.data(), e.content.size()) !=
            static_cast<ssize_t>(e.content.size()))
          return failed_step(errno, step, "write " + path);
        break;
      }
    }
  }
  return 0;
}

int install_class_view(const std::string& class_dir, const std::vector<SysfsEntry>& class_tree,
                       std::string* step) {
  // A host with RDMA devices of its own keeps them: the container sees wharf0 alone.
  if (int err = make_writable_copy(class_dir, {"infiniband", "infiniband_verbs"}, step); err != 0)
    return err;
  if (int err = write_sysfs_tree(class_dir, class_tree, step); err != 0) return err;
  // Then as read-only as the sysfs it stands for: the container may not add to it.
  if (::mount(nullptr, class_dir.c_str(), nullptr,
              MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return failed_step(errno, step, "remount " + class_dir + " read-only");
  return 0;
}

int enter_device_view(const std::vector<SysfsEntry>& class_tree, std::string* step) {
  if (::unshare(CLONE_NEWNS) != 0) return failed_step(errno, step, "unshare the mount namespace");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
    return failed_step(errno, step, "make / a slave mount");
  if (int err = remount_sys(step); err != 0) return err;
  if (int err = install_class_view("/sys/class", class_tree, step); err != 0) return err;
  if (int err = make_writable_copy("/dev", {"infiniband"}, step); err != 0) return err;
  if (::mkdir("/dev/infiniband", 0755) != 0)
    return failed_step(errno, step, "mkdir /dev/infiniband");
  if (int err = make_char_device("/dev/infiniband/uverbs0", kUverbsMajor, kUverbsMinor, step);
      err != 0)
    return err;
  return make_char_device("/dev/infiniband/rdma_cm", kRdmaCmMajor, kRdmaCmMinor, step);
}

}  // namespace wharf::container
