// A thread per router connection (a verbs context's, librdmacm's) that watches it and, when the
// router hangs up (it died or is being replaced), resumes the session at once
// (RouterClient::recover), so that the application's work continues without waiting for its next
// control verb.
#pragma once

#include <memory>
#include <thread>

#include "common/unique_fd.h"
#include "proto/router_client.h"

namespace wharf::proto {

class SessionWatch {
 public:
  SessionWatch() = default;
  SessionWatch(const SessionWatch&) = delete;
  SessionWatch& operator=(const SessionWatch&) = delete;
  ~SessionWatch() { stop(); }

  // Starts watching `client`, which must outlive stop(). Returns 0 or an errno.
  int start(RouterClient* client);
  // Ends the thread (idempotent).
  void stop();
  // In a forked child, where the thread does not exist: forgets it without a join, and
  // closes the child's copy of its stop descriptor (which would stop the parent's thread).
  void abandon_in_child();

 private:
  void run(RouterClient* client);

  // Behind a pointer so that abandon_in_child can drop it unjoined (a std::thread that ends
  // joinable terminates the process).
  std::unique_ptr<std::thread> thread_;
  UniqueFd stop_;  // eventfd: written by stop()
};

}  // namespace wharf::proto
