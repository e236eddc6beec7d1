// The container's registration with its router, kept across router restarts (#23): when the
// router closes the registration socket (it crashed or was restarted), the container is
// registered again with the router that comes back at the same socket path, with the same
// tenant, network, name, vIP, namespace and LID. The LID is kept because CMD already sees it in
// its device view and its GIDs; a router that will not give it back leaves the container
// unserved, as does one that does not come back in time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "container/router_session.h"

namespace wharf::run {

class Registration {
 public:
  // reconnect_s: how long to keep trying after the router went away; 0: not at all.
  Registration(std::string router_path, int reconnect_s, bool verbose)
      : path_(std::move(router_path)), reconnect_(reconnect_s), verbose_(verbose) {}

  // The session, for asking the router who it is before registering.
  container::RouterSession& session() { return session_; }
  // Connects to the router. Prints why and returns false on failure.
  [[nodiscard]] bool connect() { return session_.connect(path_); }

  // Registers the container (want_lid: the orchestrator's, 0: the router picks) and remembers
  // it for re-registering. netns_fd is borrowed: it must stay open while this object is used.
  // Prints why and returns false on failure.
  [[nodiscard]] bool register_container(const std::string& tenant, const std::string& network,
                                        const std::string& name, uint32_t vip, uint16_t want_lid,
                                        int netns_fd);
  // The container's LID, once registered.
  uint16_t lid() const { return lid_; }

  // For a poll loop: the descriptor to watch for POLLRDHUP (-1: none) and how long poll may
  // wait before on_poll() has something to do (-1: forever).
  int fd() const { return state_ == State::kRegistered ? session_.fd() : -1; }
  int poll_timeout_ms() const;
  // After every poll: revents are fd()'s. Notices the router going away and re-registers
  // when a try is due. One try takes at most about kTryTimeoutMs.
  void on_poll(short revents);

  // Asks the router to forget the container, if it is registered.
  void unregister() { session_.unregister_container(name_); }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirstBackoff{50};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};
  static constexpr int kTryTimeoutMs = 1000;  // for the router's reply to one registration

  enum class State { kRegistered, kReconnecting, kUnserved };

  void router_went_away();
  // One connection and registration. Returns 0 when registered, the router's errno when it
  // refused, or -1 (with *why) when it could not be asked.
  int try_register(std::string* why);
  // Gives up: says why and that CMD keeps running.
  void give_up(const std::string& why);

  std::string path_;
  std::chrono::seconds reconnect_;
  bool verbose_;
  container::RouterSession session_;
  State state_ = State::kUnserved;

  std::string tenant_, network_, name_;
  uint32_t vip_ = 0;
  int netns_fd_ = -1;
  uint16_t lid_ = 0;

  // While reconnecting: when to give up, when to try next, and the wait after that try.
  Clock::time_point deadline_;
  Clock::time_point next_try_;
  std::chrono::milliseconds backoff_{0};
};

}  // namespace wharf::run
