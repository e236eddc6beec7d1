// The KvStore on one host: a SQLite database in WAL mode (kv_store.h has the semantics).
//
// Tables: `kv` (the live keys), `events` (the change history watches read, the newest
// kHistoryRevisions revisions; older ones are compacted), `leases` (TTL and wall-clock
// expiry, so leases survive a restart of the process) and `meta` (the store revision, the
// compacted revision, the next lease ID). Every change is one SQLite transaction (BEGIN
// IMMEDIATE), so several processes may share the file. Expired leases are collected at the
// start of every operation and by watches while they wait.
#pragma once

#include <memory>
#include <string>

#include "control/kv_store.h"

namespace wharf::control {

// Opens (creating if needed) the database at `path`.
Status open_sqlite_store(const std::string& path, std::unique_ptr<KvStore>* out);

}  // namespace wharf::control
