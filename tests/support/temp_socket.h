// A router socket path in a fresh directory under /tmp, removed (with the socket) when the
// test ends: for tests that run a Router in-process.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace wharf::test_support {

class TempSocket {
 public:
  TempSocket() {
    char tmpl[] = "/tmp/wharf-unit.XXXXXX";
    const char* dir = mkdtemp(tmpl);
    dir_ = dir != nullptr ? dir : "/tmp";
  }
  ~TempSocket() {
    unlink(path().c_str());
    unlink(key_path().c_str());
    if (dir_ != "/tmp") rmdir(dir_.c_str());
  }
  TempSocket(const TempSocket&) = delete;
  TempSocket& operator=(const TempSocket&) = delete;

  std::string path() const { return dir_ + "/r.sock"; }
  // Where such a router may keep its resume key (router/resume_key.h).
  std::string key_path() const { return dir_ + "/r.key"; }

 private:
  std::string dir_;
};

}  // namespace wharf::test_support
