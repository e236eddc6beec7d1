#include "router_health.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace wharf::device_plugin {

RouterHealth::RouterHealth(std::string router_socket, bool healthy)
    : router_socket_(std::move(router_socket)), reading_{healthy, 0}, thread_([this] {
        probe_loop();
      }) {}

RouterHealth::~RouterHealth() {
  {
    const std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopping_.notify_all();
  thread_.join();
}

RouterHealth::Reading RouterHealth::now() const {
  const std::lock_guard lock(mu_);
  return reading_;
}

RouterHealth::Reading RouterHealth::wait_for_change(uint64_t seen, const std::atomic<bool>& stop,
                                                    std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return reading_.changes != seen || stop.load(); });
  return reading_;
}

void RouterHealth::wake_waiters() const {
  // Under the lock: a waiter is then either before its check of `stop` or waiting.
  const std::lock_guard lock(mu_);
  changed_.notify_all();
}

bool RouterHealth::router_answers() {
  if (session_ == nullptr) {
    session_ = std::make_unique<container::RouterSession>();
    if (session_->connect_quietly(router_socket_) != 0) {
      session_.reset();
      return false;
    }
  }
  container::RouterSession::Info info;
  // Within the probe interval: a hung router reads as down by the next probe.
  if (session_->router_info_quietly(&info, kAnswerWithinMs) != 0) {
    session_.reset();
    return false;
  }
  return true;
}

void RouterHealth::probe_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_.wait_for(lock, kProbeInterval, [this] { return stop_; })) {
    lock.unlock();
    const bool healthy = router_answers();
    lock.lock();
    if (healthy == reading_.healthy) continue;
    reading_ = {healthy, reading_.changes + 1};
    changed_.notify_all();
    if (healthy)
      spdlog::info("the router at {} answers again: devices Healthy", router_socket_);
    else
      spdlog::warn("the router at {} does not answer: devices Unhealthy", router_socket_);
  }
}

}  // namespace wharf::device_plugin
