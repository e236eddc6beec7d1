// Whether the router answers, which is the devices' health in ListAndWatch. A thread asks
// the router who it is (RouterInfo) every kProbeInterval over one connection, made again
// after it broke: healthy while the last probe was answered. Changes are logged. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "container/router_session.h"

namespace wharf::device_plugin {

class RouterHealth {
 public:
  static constexpr std::chrono::seconds kProbeInterval{2};
  static constexpr int kAnswerWithinMs = 1000;

  struct Reading {
    bool healthy = false;
    uint64_t changes = 0;  // how often the health changed so far
  };

  // Starts probing the router at `router_socket`; `healthy` holds until the first probe.
  RouterHealth(std::string router_socket, bool healthy);
  // Stops the thread (waiting out a probe under way).
  ~RouterHealth();
  RouterHealth(const RouterHealth&) = delete;
  RouterHealth& operator=(const RouterHealth&) = delete;

  Reading now() const;

  // Waits until the health changes after `seen` (a Reading::changes), `stop` is set (see
  // wake_waiters()) or `timeout` passes; returns the reading then.
  Reading wait_for_change(uint64_t seen, const std::atomic<bool>& stop,
                          std::chrono::milliseconds timeout) const;

  // Makes every wait_for_change() look at its `stop` again: call after setting one.
  void wake_waiters() const;

 private:
  void probe_loop();
  // One probe on the probe thread.
  bool router_answers();

  const std::string router_socket_;
  std::unique_ptr<container::RouterSession> session_;  // the probe thread's; null when broken

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::condition_variable stopping_;
  Reading reading_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

}  // namespace wharf::device_plugin
