#include "control/placement.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "control/cidr.h"

namespace wharf::control {
namespace {

using nlohmann::json;
using Code = Status::Code;

constexpr int kConnectTimeoutS = 5;
constexpr int kReadTimeoutS = 30;
constexpr auto kHostWait = std::chrono::seconds(10);  // for the host to register
constexpr auto kHostPoll = std::chrono::milliseconds(100);

// The answer's JSON when it is 200; else an error saying what the orchestrator said.
Status answer(const Placement& p, const httplib::Result& r, const char* what, json* out) {
  if (!r)
    return Status::error(Code::kUnavailable, "cannot reach the orchestrator at " +
                                                 p.orchestrator.url + ": " +
                                                 httplib::to_string(r.error()));
  json j = json::parse(r->body, nullptr, false);
  if (r->status == 200 && j.is_object()) {
    *out = std::move(j);
    return Status::ok();
  }
  const std::string why = j.is_object() && j.contains("error") && j["error"].is_string()
                              ? j["error"].get<std::string>()
                              : "HTTP " + std::to_string(r->status);
  return Status::error(r->status == 404 ? Code::kNotFound : Code::kFailedPrecondition,
                       "orchestrator refused to " + std::string(what) + " container " + p.tenant +
                           "/" + p.name + ": " + why);
}

std::string containers_path(const Placement& p) {
  return "/v1/tenants/" + p.tenant + "/containers";
}

}  // namespace

Status place_container(const Placement& p, uint32_t* vip, uint16_t* lid, bool* created) {
  const auto client = make_api_client(p.orchestrator, p.token, kConnectTimeoutS, kReadTimeoutS);
  httplib::Client& http = *client;
  const std::string containers = containers_path(p);
  json body = {{"name", p.name}, {"network", p.network}, {"host", p.host}};
  if (p.vip != 0) body["vip"] = format_ipv4(p.vip);
  json placed;
  const auto move_here = [&] {
    return answer(p,
                  http.Post(containers + "/" + p.name + "/move", json{{"host", p.host}}.dump(),
                            "application/json"),
                  "move", &placed);
  };
  Status st;
  auto made = http.Post(containers, body.dump(), "application/json");
  if (created != nullptr) *created = made && made->status == 200;
  if (made && made->status == 409) {
    // It exists: a container started before (here or elsewhere) comes here with its address.
    json old;
    if (st = answer(p, http.Get(containers + "/" + p.name), "look up", &old); !st.is_ok())
      return st;
    if (old.value("network", "") != p.network)
      return Status::error(Code::kAlreadyExists, "container " + p.name + " of tenant " + p.tenant +
                                                     " is in network " + old.value("network", "") +
                                                     ", not " + p.network);
    st = move_here();
  } else {
    st = answer(p, made, "create", &placed);
  }
  // No LID yet: the host has not registered. Moving the container to it again, once it has,
  // gives it one.
  const auto deadline = std::chrono::steady_clock::now() + kHostWait;
  while (st.is_ok() && !placed.value("lid", json()).is_number_unsigned()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return Status::error(Code::kExhausted,
                           "host " + p.host + " has not registered with the orchestrator at " +
                               p.orchestrator.url + ", which has no LID for container " + p.name +
                               " (is its wharfd started with --orchestrator " + p.orchestrator.url +
                               "?)");
    std::this_thread::sleep_for(kHostPoll);
    st = move_here();
  }
  if (!st.is_ok()) return st;
  uint32_t address = 0;
  if (!parse_ipv4(placed.value("vip", ""), &address))
    return Status::error(Code::kInternal, "orchestrator gave container " + p.name + " no address");
  if (p.vip != 0 && address != p.vip)
    return Status::error(Code::kAlreadyExists, "container " + p.name + " has address " +
                                                   format_ipv4(address) + ", not " +
                                                   format_ipv4(p.vip));
  const auto given = placed["lid"].get<uint64_t>();
  if (given == 0 || given > 0xffff)
    return Status::error(Code::kInternal,
                         "orchestrator gave container " + p.name + " LID " + std::to_string(given));
  *vip = address;
  *lid = static_cast<uint16_t>(given);
  return Status::ok();
}

Status find_container(const Placement& p, uint32_t* vip, std::string* host) {
  const auto client = make_api_client(p.orchestrator, p.token, kConnectTimeoutS, kReadTimeoutS);
  json record;
  if (Status st = answer(p, client->Get(containers_path(p) + "/" + p.name), "look up", &record);
      !st.is_ok())
    return st;
  if (!parse_ipv4(record.value("vip", ""), vip))
    return Status::error(Code::kInternal, "orchestrator has no address for container " + p.name);
  *host = record.value("host", "");
  return Status::ok();
}

Status release_container(const Placement& p) {
  uint32_t vip = 0;
  std::string host;
  Status st = find_container(p, &vip, &host);
  if (st.code() == Code::kNotFound) return Status::ok();
  if (!st.is_ok()) return st;
  if (host != p.host || (p.vip != 0 && vip != p.vip)) return Status::ok();  // not ours (moved)
  const auto client = make_api_client(p.orchestrator, p.token, kConnectTimeoutS, kReadTimeoutS);
  json gone;
  st = answer(p, client->Delete(containers_path(p) + "/" + p.name), "delete", &gone);
  return st.code() == Code::kNotFound ? Status::ok() : st;
}

}  // namespace wharf::control
