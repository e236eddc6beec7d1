// The one rule for files a router trusts across its own restarts (the resume key, the kept
// state of host-to-host QPs, the kept rdma_cm ids): what another user could have written, or
// could read, is not this router's.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

namespace wharf {

// True if `st` describes a regular file of this process's effective user that no other user
// may read or write (mode & 077 == 0).
inline bool is_private_file(const struct stat& st) {
  return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
}

}  // namespace wharf
