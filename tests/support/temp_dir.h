// A fresh directory under /tmp for a test's files, removed with everything in it when the
// object goes. Declare it before the members that keep files open in it (a store, a log), so
// that it goes after them. path() is empty if the directory could not be made.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace wharf::test_support {

class TempDir {
 public:
  // /tmp/<prefix>.XXXXXX
  explicit TempDir(const std::string& prefix) {
    std::string name = "/tmp/" + prefix + ".XXXXXX";
    if (mkdtemp(name.data()) != nullptr) path_ = name;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace wharf::test_support
