// wharf-oci-hook: an OCI runtime hook (stage createContainer) that gives a container the sysfs
// view of wharf0 that wharf-run gives its containers (README.md beside this file): a runtime
// cannot mount the view itself, since it cannot make mount points in the container's sysfs.
//
//   wharf-oci-hook [--router SOCKET] [--lib-dir DIR]   (the container's state on stdin)
//
// Exit status: 0 the view is in place, or the container did not ask for it; 1 it could not be
// made (the runtime then fails the container, with our message); 2 usage.
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "container/device_view.h"
#include "container/install_paths.h"
#include "device_facts.h"
#include "oci_state.h"
#include "rootfs_sysfs.h"

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// Bigger inputs are not a runtime's state or config.json.
constexpr size_t kMaxInputBytes = 4 << 20;

int failed(const std::string& what) {
  std::fprintf(stderr, "wharf-oci-hook: %s\n", what.c_str());
  return kExitFailed;
}

bool read_bounded(std::istream& in, std::string* out) {
  out->clear();
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    out->append(buf, static_cast<size_t>(in.gcount()));
    if (out->size() > kMaxInputBytes) return false;
  }
  return true;
}

// The directory of the libibverbs.so.1 this process loaded, resolved; "" if unknown.
std::string loaded_verbs_dir() {
  void* handle = ::dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return {};
  link_map* map = nullptr;
  std::string dir;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    std::error_code ec;
    const auto path = std::filesystem::canonical(map->l_name, ec);
    if (!ec) dir = path.parent_path().string();
  }
  ::dlclose(handle);
  return dir;
}

// Our libibverbs must answer, not the system's: unless the one loaded is lib_dir's, runs this
// program again with LD_LIBRARY_PATH=lib_dir (stdin, still unread, goes along). 0 when ours is
// loaded; else returns only on failure.
int run_with_our_library(const std::string& lib_dir, char** argv) {
  std::error_code ec;
  const std::string ours = std::filesystem::canonical(lib_dir, ec).string();
  if (ec) return failed("--lib-dir " + lib_dir + ": " + ec.message());
  const std::string loaded = loaded_verbs_dir();
  if (loaded == ours) return 0;
  const std::string not_ours =
      "libibverbs.so.1 came from " + (loaded.empty() ? "?" : loaded) + ", not --lib-dir " + ours;
  const char* current = ::getenv("LD_LIBRARY_PATH");
  if (current != nullptr && lib_dir == current)  // ran again, and still not ours
    return failed(not_ours + " (is Wharf's library there?)");
  // Started through a loader (a bundle's script), /proc/self/exe is the loader, not us.
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || self.filename() != "wharf-oci-hook")
    return failed(not_ours +
                  ", and this process cannot run itself again: name the directory "
                  "of the library it loads with --lib-dir");
  ::setenv("LD_LIBRARY_PATH", lib_dir.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  return failed(std::string("re-running with LD_LIBRARY_PATH=") + lib_dir + ": " +
                std::strerror(errno));
}

int run(int argc, char** argv) {
  std::string router = "/run/wharf/wharfd.sock";
  std::string lib_dir;
  CLI::App app{
      "OCI createContainer hook: the sysfs view of wharf0 in a container that asks "
      "for it (annotation io.wharf.device-view=true)"};
  app.add_option("--router", router, "The router's (wharfd's) socket on the host")
      ->capture_default_str()
      ->envname("WHARF_ROUTER");
  app.add_option("--lib-dir", lib_dir,
                 "Host directory holding Wharf's libibverbs.so.1 (default: ../lib beside "
                 "wharf-oci-hook)")
      ->envname("WHARF_LIB_DIR");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  lib_dir = wharf::container::absolute_path(lib_dir.empty() ? wharf::container::bundled_lib_dir()
                                                            : lib_dir);
  ::setenv("WHARF_ROUTER", router.c_str(), 1);  // for our library, before it is loaded
  if (int rc = run_with_our_library(lib_dir, argv); rc != 0) return rc;

  std::string text, why;
  if (!read_bounded(std::cin, &text)) return failed("the state on stdin is too long");
  const auto state = wharf::oci_hook::parse_state(text, &why);
  if (!state) return failed(why);
  if (!wharf::oci_hook::wants_view(*state)) return 0;
  std::ifstream config(state->bundle + "/config.json");
  if (!config || !read_bounded(config, &text))
    return failed("cannot read " + state->bundle + "/config.json");
  const auto root = wharf::oci_hook::root_path(text, state->bundle, &why);
  if (!root) return failed(why);

  // Each step below fails with an errno and says which step in `why`.
  auto step_failed = [&](int err) {
    return failed("container " + state->id + ": " + why + ": " + std::strerror(err));
  };
  // The container's sysfs is checked before the router is asked anything.
  std::string class_dir;
  if (int err = wharf::oci_hook::container_sysfs_class(*root, &class_dir, &why); err != 0)
    return step_failed(err);
  wharf::container::DeviceFacts facts;
  if (int err = wharf::oci_hook::query_device_facts(&facts, &why); err != 0)
    return step_failed(err);
  const std::vector<wharf::container::SysfsEntry> tree =
      wharf::container::infiniband_class_tree(facts);
  if (int err = wharf::container::install_class_view(class_dir, tree, &why); err != 0)
    return step_failed(err);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The runtime shows our message when the hook fails; memory running out is one more reason.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    return failed(std::string("failed: ") + e.what());
  }
}
