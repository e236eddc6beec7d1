#include "abi/rdmacm/registry.h"

#include <mutex>
#include <unordered_map>

namespace wharf::rdmacm::registry {
namespace {

struct Table {
  std::mutex mu;
  std::unordered_map<uint32_t, Id*> ids;
};

// Never destroyed: events may still be processed by other threads during exit.
Table& table() {
  static Table* t = new Table();
  return *t;
}

}  // namespace

bool insert(Id* id) noexcept {
  try {
    Table& t = table();
    std::lock_guard<std::mutex> g(t.mu);
    t.ids[id->handle] = id;
    return true;
  } catch (...) {
    return false;
  }
}

void erase(Id* id) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  auto it = t.ids.find(id->handle);
  if (it != t.ids.end() && it->second == id) t.ids.erase(it);
}

Id* acquire(uint32_t handle) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  auto it = t.ids.find(handle);
  if (it == t.ids.end()) return nullptr;
  ++it->second->handed;
  return it->second;
}

void complete(Id* id) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  ++id->acked;
  id->acked_cv.notify_all();
}

void wait_acked(Id* id) {
  Table& t = table();
  std::unique_lock<std::mutex> g(t.mu);
  id->acked_cv.wait(g, [id] { return id->acked >= id->handed; });
}

void for_each(const std::function<void(Id*)>& fn) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  for (const auto& [handle, id] : t.ids) fn(id);
}

}  // namespace wharf::rdmacm::registry
