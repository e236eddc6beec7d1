// What the router's helpers that talk to the orchestrator (HostAgent, ContainerWatch) share:
// an API client (control/api_client.h) whose failures cost seconds, and a thread that takes no
// signals.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "control/api_client.h"
#include "control/credentials.h"

namespace wharf::control {

// Makes c present the token `source` has now; a token that cannot be read is logged and none
// presented (the orchestrator answers 401, and the caller retries as for any refusal).
inline void present_token(httplib::Client* c, const TokenSource& source) {
  std::string token;
  std::string why;
  if (!source.get(&token, &why)) spdlog::warn("orchestrator token: {}", why);
  c->set_bearer_token_auth(token.c_str());
}

// A client for the orchestrator presenting the token `source` has now: a dead orchestrator
// costs the caller seconds, never the router's loop.
inline std::unique_ptr<httplib::Client> make_agent_client(const ApiEndpoint& api,
                                                          const TokenSource& source,
                                                          int read_timeout_s) {
  constexpr int kConnectTimeoutS = 2;
  auto c = make_api_client(api, "", kConnectTimeoutS, read_timeout_s);
  present_token(c.get(), source);
  return c;
}

// Starts fn on a thread with every signal blocked: signals belong to the process's own
// handling (the router's signalfd), and a thread inherits the mask it is created with.
template <class F>
std::thread spawn_without_signals(F&& fn) {
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  std::thread t(std::forward<F>(fn));
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return t;
}

}  // namespace wharf::control
