// Where the programs that inject Wharf's libraries find them, and how they make the paths
// they pass on absolute (a path handed to a container or a pod must not depend on the cwd).
#pragma once

#include <string>

namespace wharf::container {

// <directory of the running program>/../lib, where a build tree (build/bin, build/lib) and an
// install keep our libraries; "lib" when /proc/self/exe cannot be read.
std::string bundled_lib_dir();

// p made absolute and normal; p itself when that fails.
std::string absolute_path(const std::string& p);

}  // namespace wharf::container
