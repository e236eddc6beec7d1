#include "registration.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace wharf::run {

bool Registration::register_container(const std::string& tenant, const std::string& network,
                                      const std::string& name, uint32_t vip, uint16_t want_lid,
                                      int netns_fd) {
  uint16_t lid = 0;
  if (!session_.register_container(tenant, network, name, vip, want_lid, netns_fd, &lid))
    return false;
  tenant_ = tenant;
  network_ = network;
  name_ = name;
  vip_ = vip;
  netns_fd_ = netns_fd;
  lid_ = lid;
  state_ = State::kRegistered;
  return true;
}

int Registration::poll_timeout_ms() const {
  if (state_ != State::kReconnecting) return -1;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_try_ - Clock::now());
  return static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, wait.count()));
}

void Registration::on_poll(short revents) {
  if (state_ == State::kRegistered && revents != 0) router_went_away();
  if (state_ != State::kReconnecting || Clock::now() < next_try_) return;
  std::string why;
  const int status = try_register(&why);
  if (status == 0) {
    state_ = State::kRegistered;
    if (verbose_)
      std::fprintf(stderr, "wharf-run: re-registered container %s with router %s, LID %u\n",
                   name_.c_str(), path_.c_str(), lid_);
    return;
  }
  if (status > 0) {
    give_up("the router refused it with LID " + std::to_string(lid_) + " (" +
            std::strerror(status) + ")");
    return;
  }
  const Clock::time_point now = Clock::now();
  if (now >= deadline_) {
    give_up("no router took it within " + std::to_string(reconnect_.count()) +
            " s (last try: " + why + ")");
    return;
  }
  next_try_ = now + backoff_;
  backoff_ = std::min(2 * backoff_, kMaxBackoff);
}

void Registration::router_went_away() {
  session_.close();
  if (reconnect_.count() == 0) {
    std::fprintf(stderr,
                 "wharf-run: the router closed the registration socket; container is no "
                 "longer served (CMD keeps running)\n");
    state_ = State::kUnserved;
    return;
  }
  std::fprintf(stderr,
               "wharf-run: router went away; re-registering container %s with LID %u when a "
               "router is back at %s (for up to %lld s)\n",
               name_.c_str(), lid_, path_.c_str(), static_cast<long long>(reconnect_.count()));
  state_ = State::kReconnecting;
  next_try_ = Clock::now();
  deadline_ = next_try_ + reconnect_;
  backoff_ = kFirstBackoff;
}

int Registration::try_register(std::string* why) {
  // Until the new router listens, its path is missing or the old router's dead socket.
  if (const int err = session_.connect_quietly(path_); err != 0) {
    *why = std::strerror(err);
    return -1;
  }
  uint16_t lid = 0;
  const int status = session_.register_container_quietly(tenant_, network_, name_, vip_, lid_,
                                                         netns_fd_, &lid, kTryTimeoutMs);
  if (status < 0) {
    *why = "the router did not answer";
    return -1;
  }
  if (status > 0) session_.close();
  return status;
}

void Registration::give_up(const std::string& why) {
  std::fprintf(stderr,
               "wharf-run: could not re-register container %s: %s; it is no longer served (CMD "
               "keeps running)\n",
               name_.c_str(), why.c_str());
  state_ = State::kUnserved;
}

}  // namespace wharf::run
