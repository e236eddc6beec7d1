// What a running container leaves for `wharf-exec`: a small record under /run/wharf/containers
// naming its first process (whose namespaces a new process joins), its router and how the
// libraries are injected. wharf-run writes it once CMD runs and removes it when the container
// stops. Format: "key=value" lines (pid, router, lib_dir, dropin).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace wharf::container {

constexpr const char* kRecordDir = "/run/wharf/containers";

struct Record {
  pid_t pid = 0;        // the container's first process
  std::string router;   // router socket path, absolute
  std::string lib_dir;  // directory of our libibverbs.so.1 and librdmacm.so.1, absolute
  bool dropin = false;  // LD_LIBRARY_PATH instead of LD_PRELOAD
};

std::string record_path(const std::string& name);
// Writes atomically (temporary file + rename). Returns 0 or an errno.
int write_record(const std::string& name, const Record& r);
// Returns 0, ENOENT (no such container) or EINVAL (a malformed record).
int read_record(const std::string& name, Record* r);
// The record in `text`: 0, or EINVAL when a line is not key=value, the pid is not a positive
// number, or pid, router or lib_dir is missing. Unknown keys are ignored.
int parse_record(const std::string& text, Record* r);
void remove_record(const std::string& name);

// A process's environment inside the container: `base` plus WHARF_ROUTER, WHARF_CONTAINER
// and the library injection (LD_PRELOAD of libibverbs.so.1, then librdmacm.so.1 when
// lib_dir has it; or LD_LIBRARY_PATH=lib_dir for drop-in), each prepended to an existing
// value. Paths must be absolute.
std::vector<std::string> container_environment(const std::vector<std::string>& base,
                                               const std::string& name, const Record& r);

}  // namespace wharf::container
