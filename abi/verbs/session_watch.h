// A thread per open context that watches its router connection and, when the router hangs up
// (it died or is being replaced), resumes the session at once (RouterClient::recover), so
// that the application's work continues without waiting for its next control verb.
#pragma once

#include <thread>

#include "common/unique_fd.h"
#include "proto/router_client.h"

namespace wharf::abi {

class SessionWatch {
 public:
  SessionWatch() = default;
  SessionWatch(const SessionWatch&) = delete;
  SessionWatch& operator=(const SessionWatch&) = delete;
  ~SessionWatch() { stop(); }

  // Starts watching `client`, which must outlive stop(). Returns 0 or an errno.
  int start(proto::RouterClient* client);
  // Ends the thread (idempotent).
  void stop();

 private:
  void run(proto::RouterClient* client);

  std::thread thread_;
  UniqueFd stop_;  // eventfd: written by stop()
};

}  // namespace wharf::abi
