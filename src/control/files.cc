#include "control/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/unique_fd.h"

namespace wharf::control {

bool write_file_replacing(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".new";
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) return false;
  const bool written =
      ::fchmod(fd.get(), mode) == 0 &&
      ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
      ::fsync(fd.get()) == 0;
  if (written && ::rename(tmp.c_str(), path.c_str()) == 0) return true;
  const int err = errno;
  ::unlink(tmp.c_str());
  errno = err;
  return false;
}

bool read_whole_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return !in.bad();
}

}  // namespace wharf::control
