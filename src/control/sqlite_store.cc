#include "control/sqlite_store.h"

#include <sqlite3.h>
#include <time.h>

#include <condition_variable>
#include <mutex>
#include <set>

namespace wharf::control {
namespace {

using Code = Status::Code;

constexpr int64_t kHistoryRevisions = 10000;  // watchable history kept behind the head
constexpr int kBusyTimeoutMs = 5000;          // another process holds the write lock
constexpr auto kWatchRecheck = std::chrono::milliseconds(100);  // other processes' writes

const char* const kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES('revision', 1), ('compacted', 0), ('next_lease', 1);
CREATE TABLE IF NOT EXISTS kv(key BLOB PRIMARY KEY, value BLOB NOT NULL,
  create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL, version INTEGER NOT NULL,
  lease INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS kv_by_lease ON kv(lease) WHERE lease != 0;
CREATE TABLE IF NOT EXISTS events(rev INTEGER NOT NULL, seq INTEGER NOT NULL,
  deleted INTEGER NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL, create_rev INTEGER NOT NULL,
  version INTEGER NOT NULL, lease INTEGER NOT NULL, PRIMARY KEY(rev, seq));
CREATE TABLE IF NOT EXISTS leases(id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS leases_by_expiry ON leases(expires_ms);
)sql";

int64_t wall_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool prepared() const { return rc_ == SQLITE_OK; }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind_text(int i, const char* v) {
    sqlite3_bind_text(s_, i, v, -1, SQLITE_STATIC);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error.
  int step() { return sqlite3_step(s_); }
  int64_t i64(int col) { return sqlite3_column_int64(s_, col); }
  std::string blob(int col) {
    const void* p = sqlite3_column_blob(s_, col);
    return std::string(static_cast<const char*>(p),
                       static_cast<size_t>(sqlite3_column_bytes(s_, col)));
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

// The database and what waits on it; shared by the store and its watches.
struct Core {
  sqlite3* db = nullptr;
  std::mutex mu;                    // guards db
  std::condition_variable changed;  // notified after every committed change
  ~Core() { sqlite3_close(db); }
};

class SqliteStore;

class SqliteWatch final : public Watch {
 public:
  SqliteWatch(std::shared_ptr<Core> core, std::string prefix, int64_t next_rev)
      : core_(std::move(core)), prefix_(std::move(prefix)), next_rev_(next_rev) {}
  Status next(std::vector<WatchEvent>* events, std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<Core> core_;
  std::string prefix_;
  int64_t next_rev_;  // the first revision not yet reported
  bool dead_ = false;
};

// Everything below runs holding Core::mu.
Status sql_error(sqlite3* db, const char* what) {
  return Status::error(Code::kInternal, std::string("sqlite: ") + what + ": " + sqlite3_errmsg(db));
}

Status exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) == SQLITE_OK) return Status::ok();
  Status st =
      Status::error(sqlite3_errcode(db) == SQLITE_BUSY ? Code::kUnavailable : Code::kInternal,
                    std::string("sqlite: ") + (err != nullptr ? err : "?"));
  sqlite3_free(err);
  return st;
}

int64_t meta(sqlite3* db, const char* name) {
  Stmt s(db, "SELECT value FROM meta WHERE name = ?");
  s.bind_text(1, name);
  return s.step() == SQLITE_ROW ? s.i64(0) : 0;
}

bool set_meta(sqlite3* db, const char* name, int64_t value) {
  Stmt s(db, "UPDATE meta SET value = ? WHERE name = ?");
  s.bind(1, value).bind_text(2, name);
  return s.step() == SQLITE_DONE;
}

bool read_kv(sqlite3* db, const std::string& key, KeyValue* out) {
  Stmt s(db, "SELECT value, create_rev, mod_rev, version, lease FROM kv WHERE key = ?");
  s.bind(1, key);
  if (s.step() != SQLITE_ROW) return false;
  out->key = key;
  out->value = s.blob(0);
  out->create_revision = s.i64(1);
  out->mod_revision = s.i64(2);
  out->version = s.i64(3);
  out->lease = s.i64(4);
  return true;
}

// One revision being written: its number and the next event's place in it.
struct Change {
  int64_t rev;
  int64_t seq = 0;
};

bool write_put(sqlite3* db, Change* c, const std::string& key, const std::string& value,
               int64_t lease) {
  KeyValue old;
  const bool existed = read_kv(db, key, &old);
  const int64_t create_rev = existed ? old.create_revision : c->rev;
  const int64_t version = existed ? old.version + 1 : 1;
  Stmt s(db, "INSERT OR REPLACE INTO kv VALUES(?, ?, ?, ?, ?, ?)");
  s.bind(1, key).bind(2, value).bind(3, create_rev).bind(4, c->rev).bind(5, version).bind(6, lease);
  if (s.step() != SQLITE_DONE) return false;
  Stmt e(db, "INSERT INTO events VALUES(?, ?, 0, ?, ?, ?, ?, ?)");
  e.bind(1, c->rev).bind(2, c->seq++).bind(3, key).bind(4, value).bind(5, create_rev);
  e.bind(6, version).bind(7, lease);
  return e.step() == SQLITE_DONE;
}

// Deletes key if present; *deleted says whether it was.
bool write_delete(sqlite3* db, Change* c, const std::string& key, bool* deleted) {
  Stmt s(db, "DELETE FROM kv WHERE key = ?");
  s.bind(1, key);
  if (s.step() != SQLITE_DONE) return false;
  *deleted = sqlite3_changes(db) > 0;
  if (!*deleted) return true;
  Stmt e(db, "INSERT INTO events VALUES(?, ?, 1, ?, x'', 0, 0, 0)");
  e.bind(1, c->rev).bind(2, c->seq++).bind(3, key);
  return e.step() == SQLITE_DONE;
}

// Ends a write transaction that used revision c.rev if it changed anything: records the
// revision, drops history beyond kHistoryRevisions, commits.
Status commit(sqlite3* db, const Change& c) {
  if (c.seq == 0) return exec(db, "COMMIT");
  if (!set_meta(db, "revision", c.rev)) return sql_error(db, "revision");
  const int64_t keep_from = c.rev - kHistoryRevisions;
  if (keep_from > 0 && c.rev % 1000 == 0) {
    Stmt s(db, "DELETE FROM events WHERE rev < ?");
    s.bind(1, keep_from);
    if (s.step() != SQLITE_DONE || !set_meta(db, "compacted", keep_from - 1))
      return sql_error(db, "compaction");
  }
  return exec(db, "COMMIT");
}

// Deletes a lease and its keys in revision c (write transaction open).
bool drop_lease(sqlite3* db, Change* c, int64_t lease) {
  std::vector<std::string> keys;
  {
    Stmt s(db, "SELECT key FROM kv WHERE lease = ?");
    s.bind(1, lease);
    while (s.step() == SQLITE_ROW) keys.push_back(s.blob(0));
  }
  for (const std::string& k : keys) {
    bool deleted = false;
    if (!write_delete(db, c, k, &deleted)) return false;
  }
  Stmt d(db, "DELETE FROM leases WHERE id = ?");
  d.bind(1, lease);
  return d.step() == SQLITE_DONE;
}

// Starts a write transaction: the next revision is meta.revision + 1.
Status begin_write(sqlite3* db, Change* c) {
  Status st = exec(db, "BEGIN IMMEDIATE");
  if (!st.is_ok()) return st;
  c->rev = meta(db, "revision") + 1;
  c->seq = 0;
  return Status::ok();
}

// Deletes every expired lease with its keys, each in its own revision (as etcd revokes them).
Status expire_leases(sqlite3* db, bool* changed) {
  *changed = false;
  for (;;) {
    int64_t lease = 0;
    {
      Stmt s(db, "SELECT id FROM leases WHERE expires_ms <= ? LIMIT 1");
      s.bind(1, wall_ms());
      if (s.step() != SQLITE_ROW) return Status::ok();
      lease = s.i64(0);
    }
    Change c{};
    Status st = begin_write(db, &c);
    if (!st.is_ok()) return st;
    if (!drop_lease(db, &c, lease)) {
      (void)exec(db, "ROLLBACK");
      return sql_error(db, "lease expiry");
    }
    st = commit(db, c);
    if (!st.is_ok()) return st;
    *changed = true;
  }
}

class SqliteStore final : public KvStore {
 public:
  explicit SqliteStore(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  Status get(const std::string& key, KeyValue* out) override {
    std::unique_lock<std::mutex> g(core_->mu);
    Status st = collect_expired(g);
    if (!st.is_ok()) return st;
    if (!read_kv(core_->db, key, out)) return Status::error(Code::kNotFound, "no such key");
    return Status::ok();
  }

  Status range(const std::string& prefix, std::vector<KeyValue>* out, int64_t* revision) override {
    std::unique_lock<std::mutex> g(core_->mu);
    Status st = collect_expired(g);
    if (!st.is_ok()) return st;
    sqlite3* db = core_->db;
    st = exec(db, "BEGIN");  // one snapshot for the rows and the revision
    if (!st.is_ok()) return st;
    const std::string end = prefix_end(prefix);
    Stmt s(db, end.empty() ? "SELECT key, value, create_rev, mod_rev, version, lease FROM kv "
                             "WHERE key >= ? ORDER BY key"
                           : "SELECT key, value, create_rev, mod_rev, version, lease FROM kv "
                             "WHERE key >= ? AND key < ? ORDER BY key");
    s.bind(1, prefix);
    if (!end.empty()) s.bind(2, end);
    out->clear();
    while (s.step() == SQLITE_ROW)
      out->push_back(KeyValue{s.blob(0), s.blob(1), s.i64(2), s.i64(3), s.i64(4), s.i64(5)});
    *revision = meta(db, "revision");
    return exec(db, "COMMIT");
  }

  Status put(const std::string& key, const std::string& value, int64_t lease,
             int64_t* revision) override {
    bool ok = false;
    return txn({}, {TxnOp::put(key, value, lease)}, &ok, revision);
  }

  Status del(const std::string& key, bool* deleted, int64_t* revision) override {
    return write(
        [&](sqlite3* db, Change* c) {
          return write_delete(db, c, key, deleted) ? Status::ok() : sql_error(db, "delete");
        },
        revision);
  }

  Status txn(const std::vector<Compare>& when, const std::vector<TxnOp>& ops, bool* succeeded,
             int64_t* revision) override {
    std::set<std::string> keys;
    for (const TxnOp& op : ops)
      if (!keys.insert(op.key).second)
        return Status::error(Code::kInvalidArgument, "duplicate key given in txn request");
    return write(
        [&](sqlite3* db, Change* c) {
          *succeeded = true;
          for (const Compare& cmp : when) {
            KeyValue kv;
            const bool exists = read_kv(db, cmp.key, &kv);
            const bool holds = cmp.target == Compare::Target::kValue
                                   ? exists && kv.value == cmp.value
                                   : (exists ? kv.mod_revision : 0) == cmp.mod_revision;
            if (!holds) *succeeded = false;
          }
          if (!*succeeded) return Status::ok();
          for (const TxnOp& op : ops) {
            if (op.kind == TxnOp::Kind::kDelete) {
              bool deleted = false;
              if (!write_delete(db, c, op.key, &deleted)) return sql_error(db, "delete");
              continue;
            }
            if (op.lease != 0 && !lease_exists(db, op.lease))
              return Status::error(Code::kNotFound, "requested lease not found");
            if (!write_put(db, c, op.key, op.value, op.lease)) return sql_error(db, "put");
          }
          return Status::ok();
        },
        revision);
  }

  Status grant_lease(int64_t ttl_seconds, int64_t* lease) override {
    if (ttl_seconds <= 0) return Status::error(Code::kInvalidArgument, "lease TTL must be > 0");
    int64_t rev = 0;
    return write(
        [&](sqlite3* db, Change*) {
          *lease = meta(db, "next_lease");
          Stmt s(db, "INSERT INTO leases VALUES(?, ?, ?)");
          s.bind(1, *lease).bind(2, ttl_seconds).bind(3, wall_ms() + ttl_seconds * 1000);
          if (s.step() != SQLITE_DONE || !set_meta(db, "next_lease", *lease + 1))
            return sql_error(db, "grant");
          return Status::ok();
        },
        &rev);
  }

  Status keep_alive(int64_t lease) override {
    int64_t rev = 0;
    return write(
        [&](sqlite3* db, Change*) {
          Stmt s(db, "UPDATE leases SET expires_ms = ? + ttl * 1000 WHERE id = ?");
          s.bind(1, wall_ms()).bind(2, lease);
          if (s.step() != SQLITE_DONE) return sql_error(db, "keep_alive");
          if (sqlite3_changes(db) == 0) return Status::error(Code::kNotFound, "lease not found");
          return Status::ok();
        },
        &rev);
  }

  Status revoke_lease(int64_t lease) override {
    int64_t rev = 0;
    return write(
        [&](sqlite3* db, Change* c) {
          if (!lease_exists(db, lease)) return Status::error(Code::kNotFound, "lease not found");
          return drop_lease(db, c, lease) ? Status::ok() : sql_error(db, "revoke");
        },
        &rev);
  }

  Status watch(const std::string& prefix, int64_t from_revision,
               std::unique_ptr<Watch>* out) override {
    std::unique_lock<std::mutex> g(core_->mu);
    const int64_t next = from_revision > 0 ? from_revision : meta(core_->db, "revision") + 1;
    *out = std::make_unique<SqliteWatch>(core_, prefix, next);
    return Status::ok();
  }

 private:
  static bool lease_exists(sqlite3* db, int64_t lease) {
    Stmt s(db, "SELECT 1 FROM leases WHERE id = ?");
    s.bind(1, lease);
    return s.step() == SQLITE_ROW;
  }

  Status collect_expired(std::unique_lock<std::mutex>&) {
    bool changed = false;
    Status st = expire_leases(core_->db, &changed);
    if (changed) core_->changed.notify_all();
    return st;
  }

  // Runs body in one write transaction (rolled back unless body returns ok) and reports
  // the store revision after it.
  template <class Body>
  Status write(Body body, int64_t* revision) {
    std::unique_lock<std::mutex> g(core_->mu);
    Status st = collect_expired(g);
    if (!st.is_ok()) return st;
    sqlite3* db = core_->db;
    Change c{};
    st = begin_write(db, &c);
    if (!st.is_ok()) return st;
    st = body(db, &c);
    if (!st.is_ok()) {
      (void)exec(db, "ROLLBACK");
      return st;
    }
    st = commit(db, c);
    if (!st.is_ok()) return st;
    *revision = c.seq != 0 ? c.rev : c.rev - 1;
    if (c.seq != 0) core_->changed.notify_all();
    return Status::ok();
  }

  std::shared_ptr<Core> core_;
};

Status SqliteWatch::next(std::vector<WatchEvent>* events, std::chrono::milliseconds timeout) {
  if (dead_) return Status::error(Code::kInvalidArgument, "watch ended");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> g(core_->mu);
  sqlite3* db = core_->db;
  const std::string end = prefix_end(prefix_);
  for (;;) {
    bool expired = false;
    Status st = expire_leases(db, &expired);
    if (!st.is_ok()) return st;
    if (next_rev_ <= meta(db, "compacted")) {
      dead_ = true;
      return Status::error(Code::kCompacted, "required revision has been compacted");
    }
    // The head first: every event up to it is committed, whoever wrote it.
    const int64_t head = meta(db, "revision");
    Stmt s(db, end.empty() ? "SELECT rev, deleted, key, value, create_rev, version, lease "
                             "FROM events WHERE rev >= ? AND rev <= ? AND key >= ? "
                             "ORDER BY rev, seq"
                           : "SELECT rev, deleted, key, value, create_rev, version, lease "
                             "FROM events WHERE rev >= ? AND rev <= ? AND key >= ? AND key < ? "
                             "ORDER BY rev, seq");
    s.bind(1, next_rev_).bind(2, head).bind(3, prefix_);
    if (!end.empty()) s.bind(4, end);
    bool any = false;
    while (s.step() == SQLITE_ROW) {
      WatchEvent ev;
      ev.type = s.i64(1) != 0 ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
      ev.kv.mod_revision = s.i64(0);
      ev.kv.key = s.blob(2);
      if (ev.type == WatchEvent::Type::kPut) {
        ev.kv.value = s.blob(3);
        ev.kv.create_revision = s.i64(4);
        ev.kv.version = s.i64(5);
        ev.kv.lease = s.i64(6);
      }
      events->push_back(std::move(ev));
      any = true;
    }
    next_rev_ = std::max(next_rev_, head + 1);  // seen up to the head, matching or not
    if (any) return Status::ok();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return Status::ok();
    core_->changed.wait_for(
        g, std::min<std::chrono::steady_clock::duration>(deadline - now, kWatchRecheck));
  }
}

}  // namespace

Status open_sqlite_store(const std::string& path, std::unique_ptr<KvStore>* out) {
  auto core = std::make_shared<Core>();
  if (sqlite3_open_v2(path.c_str(), &core->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK)
    return Status::error(Code::kUnavailable,
                         "cannot open " + path + ": " + sqlite3_errmsg(core->db));
  sqlite3_busy_timeout(core->db, kBusyTimeoutMs);
  Status st = exec(core->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  if (st.is_ok()) st = exec(core->db, kSchema);
  if (!st.is_ok()) return st;
  *out = std::make_unique<SqliteStore>(std::move(core));
  return Status::ok();
}

}  // namespace wharf::control
