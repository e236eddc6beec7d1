// The etcd backend of KvStore (control/kv_store.h): etcd v3 (tested with 3.4) through its JSON
// gRPC gateway over plain HTTP, so that no gRPC stack is needed. One store object talks to one
// etcd endpoint; the orchestrator's cluster points it at any member (or a local proxy).
//
// Failures: the endpoint unreachable or an answer cut short -> kUnavailable (retrying may help);
// an answer we cannot decode -> kInternal; etcd's own errors mapped by their gRPC code
// (control/etcd_json.h). A Watch is its own HTTP stream read by a thread of its own; its
// destructor ends the stream and joins that thread within milliseconds.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/kv_store.h"

namespace httplib {
class Client;
}

namespace wharf::control {

class EtcdStore final : public KvStore {
 public:
  // base_url: "http://HOST:PORT". Does not contact the server (open_etcd_store does).
  explicit EtcdStore(std::string base_url);
  ~EtcdStore() override;

  Status get(const std::string& key, KeyValue* out) override;
  Status range(const std::string& prefix, std::vector<KeyValue>* out, int64_t* revision) override;
  Status put(const std::string& key, const std::string& value, int64_t lease,
             int64_t* revision) override;
  Status del(const std::string& key, bool* deleted, int64_t* revision) override;
  Status txn(const std::vector<Compare>& when, const std::vector<TxnOp>& ops, bool* succeeded,
             int64_t* revision) override;
  Status grant_lease(int64_t ttl_seconds, int64_t* lease) override;
  Status keep_alive(int64_t lease) override;
  Status revoke_lease(int64_t lease) override;
  Status watch(const std::string& prefix, int64_t from_revision,
               std::unique_ptr<Watch>* out) override;

  // A raw gateway call, for what KvStore does not cover (tests compact history with it):
  // POSTs the JSON `request` to `path` ("/v3/..."); *response is the body of a 200 answer.
  // Other answers become etcd's error (etcd_json::decode_error), no answer kUnavailable.
  Status post(const char* path, const std::string& request, std::string* response);

 private:
  const std::string base_url_;
  // One keep-alive connection used by one call at a time (etcd answers a unary call in about a
  // millisecond); httplib reconnects when etcd has closed it.
  std::mutex mutex_;
  std::unique_ptr<httplib::Client> client_;  // guarded by mutex_
};

// Opens the store at base_url ("http://HOST:PORT") after checking that etcd answers there:
// kUnavailable with the reason when it does not, kInvalidArgument for another kind of URL.
Status open_etcd_store(const std::string& base_url, std::unique_ptr<KvStore>* out);

}  // namespace wharf::control
