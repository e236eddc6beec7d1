#include "agent.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "agent_wire.h"
#include "common/clock.h"
#include "device.h"

namespace wharf::scala {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long one side waits for the other beyond what the point itself takes: building or
// connecting thousands of QPs, and a reply crossing the network.
constexpr int kSlackMs = 60'000;
// An agent drops a sweep that says nothing for this long between points.
constexpr int kIdleMs = 600'000;

// HOST:PORT split at the last colon; false when PORT is not 1..65535.
bool split_address(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  if (port->size() > 5 || !std::all_of(port->begin(), port->end(), ::isdigit)) return false;
  const int p = std::stoi(*port);
  return p >= 1 && p <= 65535;
}

// Waits until fd is readable or writable (events) before deadline; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool write_all(int fd, const uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    // Interrupted, or the socket is full until the peer reads: anything else ends it.
    const bool again =
        w < 0 && (errno == EINTR || (errno == EAGAIN && wait_for(fd, POLLOUT, deadline)));
    if (!again) return false;
  }
  return true;
}

bool read_all(int fd, uint8_t* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r == 0) return false;  // closed
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool send_message(int fd, const json& j, int timeout_ms) {
  const std::string body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  const auto n = static_cast<uint32_t>(body.size());
  const uint8_t len[4] = {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
                          static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  return write_all(fd, len, 4, deadline) &&
         write_all(fd, reinterpret_cast<const uint8_t*>(body.data()), body.size(), deadline);
}

// One message within timeout_ms; false and *error if none came, or it was not one.
bool receive_message(int fd, json* out, int timeout_ms, std::string* error) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t len[4];
  if (!read_all(fd, len, 4, deadline)) {
    *error = "the connection closed or said nothing in time";
    return false;
  }
  const uint32_t n =
      (uint32_t{len[0]} << 24) | (uint32_t{len[1]} << 16) | (uint32_t{len[2]} << 8) | len[3];
  if (n > agent::kMaxFrame) {
    *error = "a message of " + std::to_string(n) + " bytes";
    return false;
  }
  std::string body(n, '\0');
  if (!read_all(fd, reinterpret_cast<uint8_t*>(body.data()), n, deadline)) {
    *error = "the connection closed in the middle of a message";
    return false;
  }
  return agent::parse_body(body, out, error);
}

// A message's "op" ("" when it has none, or one that is not a string).
std::string op_of(const json& msg) {
  const auto it = msg.find("op");
  return it != msg.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An {"error": "..."} reply's text, or "" for any other message.
std::string error_in(const json& reply) {
  if (!reply.is_object() || !reply.contains("error")) return {};
  const json& e = reply.at("error");
  return e.is_string() ? e.get<std::string>() : std::string("an error");
}

int point_timeout_ms(const RunOptions& o) {
  return static_cast<int>((o.warmup_max_s + o.measure_s) * 1000) + kSlackMs;
}

// Starts every thread of the point on `half`, the meter started by the caller.
std::vector<std::thread> start_threads(Half* half, const RunOptions& opts, Meter* meter,
                                       std::vector<Tally>* tallies) {
  const uint64_t start = now_ns();
  tallies->assign(opts.threads, Tally{});
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < opts.threads; ++t)
    threads.emplace_back(
        [=] { drive({half}, t, opts, start, /*start_when_warm=*/false, meter, &(*tallies)[t]); });
  return threads;
}

// Waits until every thread is warm (or one failed), at most timeout_ms.
void wait_until_warm(const Meter& meter, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!meter.all_warm() && !meter.aborted() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(500));
}

}  // namespace

bool is_agent_address(const std::string& endpoint) {
  std::string host, port;
  return !is_router_socket(endpoint) && split_address(endpoint, &host, &port);
}

std::unique_ptr<AgentClient> AgentClient::connect(const std::string& address, std::string* error) {
  std::string host, port;
  if (!split_address(address, &host, &port)) {
    *error = address + ": not HOST:PORT";
    return nullptr;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int err = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); err != 0) {
    *error = address + ": " + gai_strerror(err);
    return nullptr;
  }
  std::unique_ptr<AgentClient> c(new AgentClient);
  c->address_ = address;
  for (addrinfo* a = found; a != nullptr && !c->sock_.valid(); a = a->ai_next) {
    UniqueFd s(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.valid() && ::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0) c->sock_ = std::move(s);
  }
  freeaddrinfo(found);
  if (!c->sock_.valid()) {
    *error = "cannot connect to the agent at " + address + ": " + strerror(errno) +
             " (is `wharf-scala serve` running there?)";
    return nullptr;
  }
  const int one = 1;
  setsockopt(c->sock_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  json reply;
  if (!send_message(c->sock_.get(), {{"op", "hello"}, {"version", agent::kVersion}}, kSlackMs) ||
      !receive_message(c->sock_.get(), &reply, kSlackMs, error)) {
    *error = "the agent at " + address + " did not answer: " + *error;
    return nullptr;
  }
  agent::Greeting g;
  if (!agent::greeting_from_json(reply, &g, error)) {
    *error = "the agent at " + address + " greeted with " + *error;
    return nullptr;
  }
  c->device_ = g.device + " (agent " + address + ")";
  c->max_qp_wr_ = g.max_qp_wr;
  c->no_rules_ = g.no_rules;
  return c;
}

PointResult AgentClient::run(Half& local, const PointSpec& spec, const RunOptions& opts) {
  if (!sock_.valid()) return PointResult::failure("the agent at " + address_ + " went away");
  const int fd = sock_.get();
  const int timeout = point_timeout_ms(opts);
  std::string error;
  json reply;
  // The connection is in an unknown state after any failure of its own: no later point uses it.
  auto lost = [&](const std::string& why) {
    sock_.reset();
    return PointResult::failure("the agent at " + address_ + ": " + why);
  };
  // The agent's half goes when asked; ours when `local` does (the caller's).
  auto end = [&] {
    local.destroy_qps();
    json ok;
    std::string why;
    if (!send_message(fd, {{"op", "end"}}, kSlackMs) || !receive_message(fd, &ok, kSlackMs, &why))
      sock_.reset();
  };

  if (!send_message(fd, {{"op", "point"}, {"point", agent::point_to_json(spec, opts)}}, timeout) ||
      !receive_message(fd, &reply, timeout, &error))
    return lost(error);
  if (std::string e = error_in(reply); !e.empty())
    return PointResult::failure("the agent's half: " + e);
  HalfInfo peer;
  if (!reply.contains("info") || !agent::info_from_json(reply.at("info"), &peer, &error)) {
    end();
    return PointResult::failure("the agent's half: " + error);
  }
  if (std::string e = local.connect(peer); !e.empty()) {
    end();
    return PointResult::failure(e);
  }
  if (!send_message(fd, {{"op", "connect"}, {"info", agent::info_to_json(local.info())}},
                    timeout) ||
      !receive_message(fd, &reply, timeout, &error))
    return lost(error);
  if (std::string e = error_in(reply); !e.empty()) {
    end();
    return PointResult::failure("the agent's half: " + e);
  }

  if (!send_message(fd, {{"op", "start"}}, timeout)) return lost("it does not read");
  Meter meter(opts.threads);
  std::vector<Tally> tallies;
  std::vector<std::thread> threads = start_threads(&local, opts, &meter, &tallies);
  wait_until_warm(meter, timeout);
  // Counting starts once both sides are warm; theirs says so.
  const bool warm = receive_message(fd, &reply, timeout, &error) && op_of(reply) == "warm";
  meter.start(now_ns());
  const bool go = warm && send_message(fd, {{"op", "go"}}, timeout);
  if (!go) meter.abort();
  for (std::thread& t : threads) t.join();
  if (!go) return lost(error.empty() ? "it does not read" : error);
  Tally theirs;
  if (!receive_message(fd, &reply, timeout, &error)) return lost(error);
  if (!reply.contains("tally") || !agent::tally_from_json(reply.at("tally"), &theirs, &error)) {
    end();
    return PointResult::failure("the agent's tally: " + error);
  }
  end();
  tallies.push_back(std::move(theirs));
  return summarize(tallies, opts.measure_s);
}

namespace {

// One sweep's session with the agent. Returns when it ends or breaks.
void serve_session(int fd, const OpenDevice& device, const std::string& no_rules) {
  json msg;
  std::string error;
  if (!receive_message(fd, &msg, kSlackMs, &error) || op_of(msg) != "hello") return;
  const agent::Greeting hello{device.dev.name, static_cast<uint32_t>(device.dev.attr.max_qp_wr),
                              no_rules};
  if (!send_message(fd, agent::greeting_to_json(hello), kSlackMs)) return;
  std::unique_ptr<Half> half;
  PointSpec spec;
  RunOptions opts;
  bool connected = false;
  auto reply_error = [&](const std::string& why) {
    return send_message(fd, {{"error", why}}, kSlackMs);
  };
  while (receive_message(fd, &msg, kIdleMs, &error)) {
    const std::string op = op_of(msg);
    if (op == "point") {
      half.reset();
      connected = false;
      if (!msg.contains("point") ||
          !agent::point_from_json(msg.at("point"), &spec, &opts, &error)) {
        if (!reply_error(error)) return;
        continue;
      }
      half = std::make_unique<Half>(&device.dev, 1, spec, opts);
      if (std::string e = half->build(); !e.empty()) {
        half.reset();
        if (!reply_error(e)) return;
        continue;
      }
      if (!send_message(fd, {{"info", agent::info_to_json(half->info())}}, kSlackMs)) return;
    } else if (op == "connect" && half != nullptr && !connected) {
      HalfInfo peer;
      std::string e;
      if (!msg.contains("info") || !agent::info_from_json(msg.at("info"), &peer, &e))
        e = "connect: " + e;
      else
        e = half->connect(peer);
      connected = e.empty();
      if (!(connected ? send_message(fd, json::object(), kSlackMs) : reply_error(e))) return;
    } else if (op == "start" && connected) {
      const int timeout = point_timeout_ms(opts);
      Meter meter(opts.threads);
      std::vector<Tally> tallies;
      std::vector<std::thread> threads = start_threads(half.get(), opts, &meter, &tallies);
      wait_until_warm(meter, timeout);
      const bool go = send_message(fd, {{"op", "warm"}}, timeout) &&
                      receive_message(fd, &msg, timeout, &error) && op_of(msg) == "go";
      meter.start(now_ns());
      if (!go) meter.abort();
      for (std::thread& t : threads) t.join();
      connected = false;  // a point runs once
      if (!go ||
          !send_message(fd, {{"tally", agent::tally_to_json(agent::merge(tallies))}}, kSlackMs))
        return;
    } else if (op == "end") {
      if (half != nullptr) half->destroy_qps();  // before the memory their peers write
      half.reset();
      connected = false;
      if (!send_message(fd, json::object(), kSlackMs)) return;
    } else if (!reply_error("unexpected \"" + agent::clip(op, 32) + "\"")) {
      return;
    }
  }
}

}  // namespace

UniqueFd listen_at(const std::string& address, std::string* error) {
  std::string host, port;
  if (!split_address(address, &host, &port)) {
    *error = "not ADDR:PORT";
    return {};
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int err = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); err != 0) {
    *error = gai_strerror(err);
    return {};
  }
  UniqueFd listener(socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0));
  const int one = 1;
  const bool ok = listener.valid() &&
                  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
                  bind(listener.get(), found->ai_addr, found->ai_addrlen) == 0 &&
                  listen(listener.get(), 4) == 0;
  freeaddrinfo(found);
  if (!ok) {
    *error = strerror(errno);
    return {};
  }
  return listener;
}

int serve(const std::string& device_name, const std::string& address, int listener, bool once) {
  std::string error;
  std::unique_ptr<OpenDevice> device = open_device(device_name, &error);
  if (device == nullptr) {
    fprintf(stderr, "wharf-scala: %s\n", error.c_str());
    return 1;
  }
  const std::string no_rules = Half::probe_rules(device->dev);
  printf("wharf-scala: serving %s at %s\n", device->dev.name.c_str(), address.c_str());
  fflush(stdout);
  const int one = 1;
  for (;;) {
    UniqueFd client(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      fprintf(stderr, "wharf-scala: accept: %s\n", strerror(errno));
      return 1;
    }
    setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    serve_session(client.get(), *device, no_rules);
    if (once) return 0;
  }
}

}  // namespace wharf::scala
