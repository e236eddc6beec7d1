// fork() support: a child neither shares registered buffers with its parent nor keeps the
// parent's router connections alive; it opens its own contexts (rdma-core semantics: the
// parent's verbs objects are not usable in the child).
#pragma once

#include <sys/types.h>

namespace wharf::abi {

struct Context;

// Installs the pthread_atfork handlers once.
void install_fork_handlers();
// The process's open contexts (not imported ones), for fork and for ibv_import_device.
// track_context is false when memory ran out.
[[nodiscard]] bool track_context(Context* ctx) noexcept;
void untrack_context(Context* ctx);
// The open context whose cmd_fd is the file (st_dev, st_ino), or nullptr.
Context* context_with_cmd_file(dev_t dev, ino_t ino);

}  // namespace wharf::abi
