// The process's ids by router handle: events name ids by handle, and an event for an id the
// library no longer knows is dropped. The registry mutex also guards every Id's event counters,
// so that an id found for an event cannot be freed before that event is acked.
#pragma once

#include <cstdint>
#include <functional>

#include "abi/rdmacm/id.h"

namespace wharf::rdmacm::registry {

// Registers id under its handle; false when memory ran out.
[[nodiscard]] bool insert(Id* id) noexcept;
// After erase() no new event is handed out for the id.
void erase(Id* id);

// The id of `handle` with one more event counted as handed out, or nullptr if unknown. The
// caller either hands the event to the application or calls complete() itself.
Id* acquire(uint32_t handle);
// One handed-out event of `id` was acked (rdma_ack_cm_event).
void complete(Id* id);
// Blocks until every event handed out for `id` has been acked.
void wait_acked(Id* id);
// Calls fn for every registered id, under the registry mutex (fn must not take it).
void for_each(const std::function<void(Id*)>& fn);

}  // namespace wharf::rdmacm::registry
