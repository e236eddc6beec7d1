// fork() support: a child neither shares registered buffers with its parent nor keeps the
// parent's router connections alive; it opens its own contexts (rdma-core semantics: the
// parent's verbs objects are not usable in the child).
#pragma once

namespace wharf::abi {

struct Context;

// Installs the pthread_atfork handlers once.
void install_fork_handlers();
void track_context(Context* ctx);
void untrack_context(Context* ctx);

}  // namespace wharf::abi
