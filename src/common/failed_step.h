// Functions made of many steps that fail with an errno name the step that failed in a string
// their caller gives (`std::string* step`, "mount tmpfs on /x"): this records it and returns
// the errno, as in `return failed_step(errno, step, "open " + path);`.
#pragma once

#include <string>
#include <utility>

namespace wharf {

inline int failed_step(int err, std::string* step, std::string what) {
  *step = std::move(what);
  return err;
}

}  // namespace wharf
