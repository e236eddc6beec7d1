#include "placement.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "options.h"

namespace wharf::run {
namespace {

using nlohmann::json;

constexpr int kConnectTimeoutS = 5;
constexpr int kReadTimeoutS = 30;
constexpr auto kHostWait = std::chrono::seconds(10);  // for the host to register
constexpr auto kHostPoll = std::chrono::milliseconds(100);

// The answer's JSON when it is 200, else prints the orchestrator's error and returns null.
json answer(const Placement& p, const httplib::Result& r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "wharf-run: cannot reach the orchestrator at %s: %s\n",
                 p.orchestrator.url.c_str(), httplib::to_string(r.error()).c_str());
    return nullptr;
  }
  json j = json::parse(r->body, nullptr, false);
  if (r->status == 200 && j.is_object()) return j;
  const std::string why = j.is_object() && j.contains("error") && j["error"].is_string()
                              ? j["error"].get<std::string>()
                              : "HTTP " + std::to_string(r->status);
  std::fprintf(stderr, "wharf-run: orchestrator refused to %s container %s: %s\n", what,
               p.name.c_str(), why.c_str());
  return nullptr;
}

}  // namespace

bool place_container(const Placement& p, uint32_t* vip, uint16_t* lid) {
  const auto client =
      control::make_api_client(p.orchestrator, p.token, kConnectTimeoutS, kReadTimeoutS);
  httplib::Client& http = *client;
  const std::string containers = "/v1/tenants/" + p.tenant + "/containers";
  json body = {{"name", p.name}, {"network", p.network}, {"host", p.host}};
  if (p.vip != 0) body["vip"] = format_ipv4(p.vip);
  const auto move_here = [&] {
    return answer(p,
                  http.Post(containers + "/" + p.name + "/move", json{{"host", p.host}}.dump(),
                            "application/json"),
                  "move");
  };
  json placed;
  auto made = http.Post(containers, body.dump(), "application/json");
  if (made && made->status == 409) {
    // It exists: a container started before (here or elsewhere) comes here with its address.
    json old = answer(p, http.Get(containers + "/" + p.name), "look up");
    if (old.is_null()) return false;
    if (old.value("network", "") != p.network) {
      std::fprintf(stderr, "wharf-run: container %s of tenant %s is in network %s, not %s\n",
                   p.name.c_str(), p.tenant.c_str(), old.value("network", "").c_str(),
                   p.network.c_str());
      return false;
    }
    placed = move_here();
  } else {
    placed = answer(p, made, "create");
  }
  // No LID yet: the host has not registered. Moving the container to it again, once it has,
  // gives it one.
  const auto deadline = std::chrono::steady_clock::now() + kHostWait;
  while (placed.is_object() && !placed.value("lid", json()).is_number_unsigned()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr,
                   "wharf-run: host %s has not registered with the orchestrator at %s, which "
                   "has no LID for container %s (is its wharfd started with --orchestrator "
                   "%s?)\n",
                   p.host.c_str(), p.orchestrator.url.c_str(), p.name.c_str(),
                   p.orchestrator.url.c_str());
      return false;
    }
    std::this_thread::sleep_for(kHostPoll);
    placed = move_here();
  }
  if (placed.is_null()) return false;
  auto address = parse_ipv4(placed.value("vip", ""));
  if (!address) {
    std::fprintf(stderr, "wharf-run: orchestrator gave container %s no address\n", p.name.c_str());
    return false;
  }
  if (p.vip != 0 && *address != p.vip) {
    std::fprintf(stderr, "wharf-run: container %s has address %s, not the --vip given\n",
                 p.name.c_str(), format_ipv4(*address).c_str());
    return false;
  }
  *vip = *address;
  *lid = placed["lid"].get<uint16_t>();
  return true;
}

}  // namespace wharf::run
