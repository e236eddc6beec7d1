#include "abi/verbs/fork.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "abi/verbs/mr_backing.h"
#include "abi/verbs/provider.h"

namespace wharf::abi {
namespace {

std::mutex contexts_mu;
std::vector<Context*> contexts;  // guarded by contexts_mu

void prepare() {
  contexts_mu.lock();
  lock_registry_for_fork();
}

void parent() {
  unlock_registry_after_fork();
  contexts_mu.unlock();
}

void child() {
  unlock_registry_after_fork();
  unshare_backings_after_fork();
  for (Context* c : contexts) {  // the parent's session is not ours
    c->client.abandon_in_child();
    c->watch.abandon_in_child();
  }
  contexts.clear();
  contexts_mu.unlock();
}

}  // namespace

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(prepare, parent, child); });
}

bool track_context(Context* ctx) noexcept {
  try {
    std::lock_guard<std::mutex> g(contexts_mu);
    contexts.push_back(ctx);
    return true;
  } catch (...) {
    return false;
  }
}

Context* context_with_cmd_file(dev_t dev, ino_t ino) {
  std::lock_guard<std::mutex> g(contexts_mu);
  for (Context* c : contexts) {
    struct stat st;
    if (fstat(c->vctx.context.cmd_fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino) return c;
  }
  return nullptr;
}

void untrack_context(Context* ctx) {
  std::lock_guard<std::mutex> g(contexts_mu);
  contexts.erase(std::remove(contexts.begin(), contexts.end(), ctx), contexts.end());
}

}  // namespace wharf::abi
