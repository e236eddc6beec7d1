#include "container/install_paths.h"

#include <filesystem>
#include <system_error>

namespace wharf::container {

namespace fs = std::filesystem;

std::string bundled_lib_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "lib";
  return (exe.parent_path().parent_path() / "lib").string();
}

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

}  // namespace wharf::container
