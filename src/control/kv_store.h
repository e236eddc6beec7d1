// The orchestrator's state store (issue #4): a revisioned key-value store with etcd v3's
// semantics, behind one interface with two backends (control/sqlite_store.h for one host,
// control/etcd_store.h for a cluster).
//
// Semantics (etcd's, so both backends answer alike):
// - Every change (put, delete, a transaction that changed something, a lease expiring with
//   keys attached) gets the next store revision; a transaction's changes share one revision.
// - A key carries create_revision, mod_revision, version (puts since it was created) and the
//   lease it is attached to (0: none). mod_revision 0 means "absent" in comparisons.
// - A lease is granted with a TTL in seconds; keys put with it are deleted when it expires
//   or is revoked. keep_alive renews the full TTL.
// - A watch reports every change under a prefix from a given revision on, in revision order;
//   history older than the store keeps is kCompacted (the watcher then re-reads with range).
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace wharf::control {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// One condition of a transaction, on one key.
struct Compare {
  enum class Target { kModRevision, kValue };
  std::string key;
  Target target = Target::kModRevision;
  int64_t mod_revision = 0;  // kModRevision: equal to this (0: the key is absent)
  std::string value;         // kValue: the key exists with exactly this value

  static Compare absent(std::string key) { return {std::move(key), Target::kModRevision, 0, {}}; }
  static Compare mod_revision_is(std::string key, int64_t rev) {
    return {std::move(key), Target::kModRevision, rev, {}};
  }
  static Compare value_is(std::string key, std::string value) {
    return {std::move(key), Target::kValue, 0, std::move(value)};
  }
};

// One change a transaction makes.
struct TxnOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;  // kPut
  int64_t lease = 0;  // kPut

  static TxnOp put(std::string key, std::string value, int64_t lease = 0) {
    return {Kind::kPut, std::move(key), std::move(value), lease};
  }
  static TxnOp del(std::string key) { return {Kind::kDelete, std::move(key), {}, 0}; }
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete: key and mod_revision (the revision of the deletion) only
};

class Watch {
 public:
  virtual ~Watch() = default;
  // Waits up to `timeout` for changes and appends them to *events (possibly none). After a
  // non-ok status the watch is dead.
  virtual Status next(std::vector<WatchEvent>* events, std::chrono::milliseconds timeout) = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // The key's current entry; kNotFound when absent.
  virtual Status get(const std::string& key, KeyValue* out) = 0;
  // Every key starting with `prefix`, in key order, and the store revision they were read at.
  virtual Status range(const std::string& prefix, std::vector<KeyValue>* out,
                       int64_t* revision) = 0;
  // Sets the key (attached to `lease` if not 0; kNotFound if that lease does not exist).
  virtual Status put(const std::string& key, const std::string& value, int64_t lease,
                     int64_t* revision) = 0;
  // Deletes the key; *deleted says whether it existed.
  virtual Status del(const std::string& key, bool* deleted, int64_t* revision) = 0;
  // Atomically: if every comparison holds, applies `ops` (*succeeded = true), else changes
  // nothing (*succeeded = false). *revision is the store revision after the transaction.
  virtual Status txn(const std::vector<Compare>& when, const std::vector<TxnOp>& ops,
                     bool* succeeded, int64_t* revision) = 0;

  virtual Status grant_lease(int64_t ttl_seconds, int64_t* lease) = 0;
  // Renews the lease's TTL; kNotFound if it expired or was revoked.
  virtual Status keep_alive(int64_t lease) = 0;
  virtual Status revoke_lease(int64_t lease) = 0;

  // Changes under `prefix` with revision >= from_revision (0: from now on).
  virtual Status watch(const std::string& prefix, int64_t from_revision,
                       std::unique_ptr<Watch>* out) = 0;
};

// The first key after every key that starts with `prefix` (etcd's range_end of a prefix:
// trailing 0xff bytes dropped, the last byte incremented), or "" when no key bounds them
// (the prefix is empty or all 0xff).
std::string prefix_end(std::string prefix);

// Opens the store a URL names: "sqlite:PATH" or "etcd:http://HOST:PORT".
Status open_kv_store(const std::string& url, std::unique_ptr<KvStore>* out);

}  // namespace wharf::control
