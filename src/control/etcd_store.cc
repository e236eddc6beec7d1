#include "control/etcd_store.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <utility>

#include "control/etcd_json.h"

namespace wharf::control {
namespace {

using etcd_json::base64_encode;
using nlohmann::json;

constexpr auto kConnectTimeout = std::chrono::seconds(2);
// Above etcd's own request timeout (about 7 s for one member), so etcd reports its timeouts.
constexpr auto kCallTimeout = std::chrono::seconds(10);
constexpr auto kWatchCreateTimeout = std::chrono::seconds(10);
// A watch asks for progress notifications, which etcd 3.4 sends every 10 minutes on an idle
// stream; a stream silent for longer than this is dead (e.g. a partition without a reset).
constexpr auto kWatchIdleLimit = std::chrono::minutes(15);
constexpr auto kWatchStopPoll = std::chrono::milliseconds(20);
// Answers larger than these are hostile (the orchestrator's state is a few MiB).
constexpr size_t kMaxAnswer = size_t{256} << 20;
constexpr size_t kMaxWatchMessage = size_t{64} << 20;

Status unavailable(const std::string& what) {
  return Status::error(Status::Code::kUnavailable, what);
}

Status internal(const std::string& what) { return Status::error(Status::Code::kInternal, what); }

// etcd's int64 fields travel as JSON strings.
std::string int64_text(int64_t v) { return std::to_string(v); }

// The range request (or watch create request) for every key starting with `prefix`. etcd has
// no empty key, so the empty prefix is key "\0"; range_end "\0" means no upper bound.
json prefix_request(const std::string& prefix) {
  const std::string end = prefix_end(prefix);
  return {{"key", base64_encode(prefix.empty() ? std::string(1, '\0') : prefix)},
          {"range_end", base64_encode(end.empty() ? std::string(1, '\0') : end)}};
}

std::unique_ptr<httplib::Client> make_client(const std::string& base_url,
                                             std::chrono::seconds read_timeout) {
  auto client = std::make_unique<httplib::Client>(base_url);
  client->set_connection_timeout(kConnectTimeout);
  client->set_read_timeout(read_timeout);
  client->set_write_timeout(kCallTimeout);
  // httplib writes a request's headers and body separately: with Nagle's algorithm the body
  // waits for etcd's delayed ACK, 40 ms a call on a kept-alive connection.
  client->set_tcp_nodelay(true);
  return client;
}

// One watch: a POST /v3/watch whose endless answer a reader thread decodes line by line into
// a queue that next() drains.
class EtcdWatch final : public Watch {
 public:
  EtcdWatch(const std::string& base_url, std::string prefix, int64_t from_revision,
            std::string request)
      : client_(make_client(base_url, kWatchIdleLimit)),
        prefix_(std::move(prefix)),
        last_revision_(from_revision),
        thread_([this, request = std::move(request)]() mutable { run(std::move(request)); }) {}

  // Ends the stream: the flag stops the receiver at its next chunk, client_->stop() wakes a
  // reader blocked on an idle socket; repeated because the request may not have started yet.
  ~EtcdWatch() override {
    stopping_ = true;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!reader_done_) {
      lock.unlock();
      client_->stop();
      lock.lock();
      cv_.wait_for(lock, kWatchStopPoll, [this] { return reader_done_; });
    }
    lock.unlock();
    thread_.join();
  }

  // Waits until etcd confirms the watch, so that every change after watch() returns is seen.
  Status wait_created() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, kWatchCreateTimeout,
                      [this] { return created_ || !failure_.is_ok(); })) {
      return unavailable("etcd did not confirm a watch within 10 s");
    }
    return created_ ? Status::ok() : failure_;
  }

  Status next(std::vector<WatchEvent>* events, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [this] { return !queue_.empty() || !failure_.is_ok(); });
    if (!queue_.empty()) {
      for (WatchEvent& e : queue_) events->push_back(std::move(e));
      queue_.clear();
      return Status::ok();
    }
    return failure_;  // ok when nothing happened in time
  }

 private:
  void run(std::string body) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/v3/watch";
    req.body = std::move(body);
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
      return !stopping_ && receive(std::string_view(data, n));
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = !stopping_ && client_->send(req, res, error);
    // A last message without its newline: the stream ended (a plain error body, typically).
    if (!stopping_ && !line_.empty()) on_line(line_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      fail(sent ? unavailable("etcd ended the watch stream")
                : unavailable("the watch stream from etcd broke (httplib: " +
                              httplib::to_string(error) + ")"));
    }
    reader_done_ = true;
    cv_.notify_all();
  }

  // Reader thread: splits the stream into lines (JSON text holds no raw newline).
  bool receive(std::string_view data) {
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      line_.append(data.substr(0, nl));
      if (line_.size() > kMaxWatchMessage) {
        std::lock_guard<std::mutex> lock(mutex_);
        fail(internal("malformed answer from etcd: a watch message over 64 MiB"));
        return false;
      }
      if (nl == std::string_view::npos) break;
      if (!on_line(line_)) return false;
      line_.clear();
      data.remove_prefix(nl + 1);
    }
    return true;
  }

  // Reader thread: one message; false once the watch failed.
  bool on_line(std::string_view line) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
    etcd_json::WatchMessage msg;
    const Status s = etcd_json::decode_watch_message(line, &msg);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!s.is_ok()) {
      fail(s);
    } else if (msg.canceled) {
      fail(msg.compact_revision > 0
               ? Status::error(Status::Code::kCompacted, "etcd compacted history before revision " +
                                                             std::to_string(msg.compact_revision))
               : unavailable("etcd canceled the watch: " + msg.cancel_reason));
    } else {
      created_ = created_ || msg.created;
      for (WatchEvent& e : msg.events) {
        if (e.kv.mod_revision < last_revision_ ||
            e.kv.key.compare(0, prefix_.size(), prefix_) != 0) {
          fail(internal("malformed answer from etcd: a watch event out of order or prefix"));
          break;
        }
        last_revision_ = e.kv.mod_revision;
        queue_.push_back(std::move(e));
      }
    }
    cv_.notify_all();
    return failure_.is_ok();
  }

  // Under mutex_: the first failure is the one next() reports.
  void fail(Status s) {
    if (failure_.is_ok()) failure_ = std::move(s);
  }

  const std::unique_ptr<httplib::Client> client_;
  const std::string prefix_;
  std::atomic<bool> stopping_{false};
  std::string line_;  // reader thread only: the message being received

  std::mutex mutex_;
  std::condition_variable cv_;
  bool created_ = false;           // guarded by mutex_
  bool reader_done_ = false;       // guarded by mutex_
  Status failure_;                 // guarded by mutex_; ok while the watch lives
  int64_t last_revision_;          // guarded by mutex_
  std::vector<WatchEvent> queue_;  // guarded by mutex_
  std::thread thread_;             // last: it starts running in the constructor
};

}  // namespace

EtcdStore::EtcdStore(std::string base_url)
    : base_url_(std::move(base_url)), client_(make_client(base_url_, kCallTimeout)) {
  client_->set_keep_alive(true);
}

EtcdStore::~EtcdStore() = default;

Status EtcdStore::post(const char* path, const std::string& request, std::string* response) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = request;
  req.set_header("Content-Type", "application/json");
  int http_status = 0;
  std::string body;
  req.response_handler = [&http_status](const httplib::Response& r) {
    http_status = r.status;
    return true;
  };
  req.content_receiver = [&body](const char* data, size_t n, uint64_t, uint64_t) {
    body.append(data, n);
    return body.size() <= kMaxAnswer;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  bool complete;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    complete = client_->send(req, res, error);
  }
  // etcd 3.4's gateway ends every error answer with an HTTP trailer (Grpc-Trailer-Content-Type),
  // which httplib 0.11 fails to read after the body: a complete error object is the answer
  // whether or not the read got past the trailer.
  Status etcd_error;
  if (http_status != 200 && etcd_json::decode_error(body, &etcd_error)) return etcd_error;
  if (body.size() > kMaxAnswer) {
    return internal("etcd at " + base_url_ + ": an answer over 256 MiB");
  }
  if (!complete) {
    return unavailable("no answer from etcd at " + base_url_ +
                       " (httplib: " + httplib::to_string(error) + ")");
  }
  if (http_status != 200) {
    return internal("etcd at " + base_url_ + " answered HTTP " + std::to_string(http_status) +
                    " without an error object (" + std::to_string(body.size()) + " bytes)");
  }
  *response = std::move(body);
  return Status::ok();
}

Status EtcdStore::get(const std::string& key, KeyValue* out) {
  std::string body;
  Status s = post("/v3/kv/range", json{{"key", base64_encode(key)}}.dump(), &body);
  std::vector<KeyValue> kvs;
  int64_t revision = 0;
  if (s.is_ok()) s = etcd_json::decode_range(body, &kvs, &revision);
  if (!s.is_ok()) return s;
  if (kvs.empty()) return Status::error(Status::Code::kNotFound, "no key " + key);
  if (kvs.size() != 1 || kvs[0].key != key) return internal("etcd answered another key");
  *out = std::move(kvs[0]);
  return Status::ok();
}

Status EtcdStore::range(const std::string& prefix, std::vector<KeyValue>* out, int64_t* revision) {
  std::string body;
  Status s = post("/v3/kv/range", prefix_request(prefix).dump(), &body);
  if (s.is_ok()) s = etcd_json::decode_range(body, out, revision);
  if (!s.is_ok()) return s;
  for (const KeyValue& kv : *out) {
    if (kv.key.compare(0, prefix.size(), prefix) != 0) {
      out->clear();
      return internal("etcd answered a key outside the prefix");
    }
  }
  return Status::ok();
}

Status EtcdStore::put(const std::string& key, const std::string& value, int64_t lease,
                      int64_t* revision) {
  json req = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) req["lease"] = int64_text(lease);
  std::string body;
  Status s = post("/v3/kv/put", req.dump(), &body);
  return s.is_ok() ? etcd_json::decode_header(body, revision) : s;
}

Status EtcdStore::del(const std::string& key, bool* deleted, int64_t* revision) {
  std::string body;
  Status s = post("/v3/kv/deleterange", json{{"key", base64_encode(key)}}.dump(), &body);
  int64_t count = 0;
  if (s.is_ok()) s = etcd_json::decode_delete(body, &count, revision);
  *deleted = s.is_ok() && count > 0;
  return s;
}

Status EtcdStore::txn(const std::vector<Compare>& when, const std::vector<TxnOp>& ops,
                      bool* succeeded, int64_t* revision) {
  json compare = json::array();
  for (const Compare& c : when) {
    json j = {{"key", base64_encode(c.key)}, {"result", "EQUAL"}};
    if (c.target == Compare::Target::kModRevision) {
      j["target"] = "MOD";
      j["mod_revision"] = int64_text(c.mod_revision);
    } else {
      j["target"] = "VALUE";  // false for an absent key, whatever the value
      j["value"] = base64_encode(c.value);
    }
    compare.push_back(std::move(j));
  }
  json success = json::array();
  for (const TxnOp& op : ops) {
    if (op.kind == TxnOp::Kind::kPut) {
      json put = {{"key", base64_encode(op.key)}, {"value", base64_encode(op.value)}};
      if (op.lease != 0) put["lease"] = int64_text(op.lease);
      success.push_back({{"request_put", std::move(put)}});
    } else {
      success.push_back({{"request_delete_range", {{"key", base64_encode(op.key)}}}});
    }
  }
  const json req = {{"compare", std::move(compare)}, {"success", std::move(success)}};
  std::string body;
  Status s = post("/v3/kv/txn", req.dump(), &body);
  return s.is_ok() ? etcd_json::decode_txn(body, succeeded, revision) : s;
}

Status EtcdStore::grant_lease(int64_t ttl_seconds, int64_t* lease) {
  // etcd would silently raise a TTL under its minimum; a lease without a TTL is a caller bug.
  if (ttl_seconds <= 0) {
    return Status::error(Status::Code::kInvalidArgument,
                         "lease TTL must be positive, not " + std::to_string(ttl_seconds));
  }
  std::string body;
  Status s = post("/v3/lease/grant", json{{"TTL", int64_text(ttl_seconds)}}.dump(), &body);
  return s.is_ok() ? etcd_json::decode_lease_grant(body, lease) : s;
}

Status EtcdStore::keep_alive(int64_t lease) {
  // A bidirectional stream on the gateway; one request in the body gets one answer, then the
  // stream ends with the body.
  std::string body;
  Status s = post("/v3/lease/keepalive", json{{"ID", int64_text(lease)}}.dump(), &body);
  int64_t ttl = 0;
  if (s.is_ok()) s = etcd_json::decode_keep_alive(body, &ttl);
  if (!s.is_ok()) return s;
  // etcd answers an expired or unknown lease with no TTL rather than an error.
  if (ttl == 0) {
    return Status::error(Status::Code::kNotFound, "lease " + std::to_string(lease) + " expired");
  }
  return Status::ok();
}

Status EtcdStore::revoke_lease(int64_t lease) {
  std::string body;
  Status s = post("/v3/lease/revoke", json{{"ID", int64_text(lease)}}.dump(), &body);
  int64_t revision = 0;
  return s.is_ok() ? etcd_json::decode_header(body, &revision) : s;
}

Status EtcdStore::watch(const std::string& prefix, int64_t from_revision,
                        std::unique_ptr<Watch>* out) {
  json create = prefix_request(prefix);
  // Periodic empty messages let the reader tell an idle stream from a dead one.
  create["progress_notify"] = true;
  if (from_revision > 0) create["start_revision"] = int64_text(from_revision);
  auto w = std::make_unique<EtcdWatch>(base_url_, prefix, from_revision,
                                       json{{"create_request", std::move(create)}}.dump());
  Status s = w->wait_created();
  if (!s.is_ok()) return s;
  *out = std::move(w);
  return Status::ok();
}

Status open_etcd_store(const std::string& base_url, std::unique_ptr<KvStore>* out) {
  constexpr std::string_view kScheme = "http://";
  const std::string_view host_port = std::string_view(base_url).substr(
      base_url.rfind(kScheme, 0) == 0 ? kScheme.size() : base_url.size());
  if (host_port.empty() || host_port.find_first_of("/?#@") != std::string_view::npos ||
      !httplib::Client(base_url).is_valid()) {
    return Status::error(Status::Code::kInvalidArgument,
                         "etcd URL must be http://HOST:PORT, not " + base_url);
  }
  auto store = std::make_unique<EtcdStore>(base_url);
  std::string body;
  int64_t revision = 0;
  Status s = store->post("/v3/maintenance/status", "{}", &body);
  if (s.is_ok()) s = etcd_json::decode_header(body, &revision);
  if (!s.is_ok()) {
    return Status::error(s.code(), "opening the etcd store: " + s.message());
  }
  *out = std::move(store);
  return Status::ok();
}

}  // namespace wharf::control
