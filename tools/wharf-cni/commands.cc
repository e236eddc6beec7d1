#include "commands.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/ipv4.h"
#include "common/unique_fd.h"
#include "container/router_session.h"
#include "control/credentials.h"
#include "control/placement.h"

namespace wharf::cni {
namespace {

using nlohmann::json;

Outcome failed(ErrorCode code, std::string msg, std::string details = "") {
  return {false, "", {code, std::move(msg), std::move(details)}};
}

Outcome unreachable(const NetConf& conf, int err) {
  return failed(ErrorCode::kRouterUnreachable,
                "cannot reach the router at " + conf.router + ": " +
                    (err < 0 ? "it stopped answering" : std::strerror(err)),
                "is wharfd running with --socket " + conf.router + "?");
}

std::string describe(const container::HeldContainer& c) {
  return c.tenant + "/" + c.name + " (network " + c.network + ", " + format_ipv4(c.vip) + ")";
}

// The registration ADD makes for this invocation.
container::HeldContainer wanted(const Invocation& inv, const NetConf& conf) {
  container::HeldContainer c;
  c.sandbox = inv.sandbox;
  c.tenant = conf.tenant;
  c.network = conf.network;
  c.name = pod_name(inv);
  c.vip = conf.pod_ip;
  return c;
}

// Why the router refused to hold `c` (an errno of Router::hold_container).
Outcome refused(container::RouterSession& session, const container::HeldContainer& c, int err) {
  std::string why;
  switch (err) {
    case EEXIST: {
      container::HeldContainer held;
      held.sandbox = c.sandbox;
      why = session.held_container(&held) == 0
                ? "sandbox " + c.sandbox + " is already registered as " + describe(held)
                : "the router already has container " + c.tenant + "/" + c.name +
                      " or an address " + format_ipv4(c.vip) + " in network " + c.tenant + "/" +
                      c.network;
      break;
    }
    case EBUSY: why = "the pod's applications opened the device before ADD"; break;
    case ENOSPC: why = "the router has no free LID"; break;
    case EPERM: why = "only root outside pods may register containers"; break;
    case EINVAL: why = "CNI_NETNS is not a network namespace"; break;
    default: why = std::strerror(err);
  }
  return failed(ErrorCode::kRegistrationRefused,
                "the router refused to register pod " + c.tenant + "/" + c.name + ": " + why,
                "errno " + std::to_string(err));
}

// Pod `pod`'s record at the configuration's orchestrator, for the router's host.
bool placement(const container::HeldContainer& pod, const NetConf& conf,
               container::RouterSession& session, control::Placement* p, Outcome* failure) {
  container::RouterSession::Info info;
  std::string token;
  std::string why;
  if (!control::TokenSource(conf.token_file).get(&token, &why)) {
    *failure = failed(ErrorCode::kInvalidConfig, "\"tokenFile\": " + why);
    return false;
  }
  if (session.router_info_quietly(&info) != 0 || info.host.empty()) {
    *failure = failed(ErrorCode::kRegistrationRefused,
                      "the router at " + conf.router + " has no host name",
                      "start wharfd with --orchestrator and --host to use \"orchestrator\"");
    return false;
  }
  *p = {{conf.orchestrator, conf.tls_ca},
        token,
        pod.tenant,
        pod.network,
        pod.name,
        info.host,
        pod.vip};
  return true;
}

Outcome orchestrator_failed(const Status& st) {
  switch (st.code()) {
    case Status::Code::kUnavailable:
      return failed(ErrorCode::kOrchestratorUnreachable, st.message());
    case Status::Code::kExhausted: return failed(ErrorCode::kTryAgainLater, st.message());
    default: return failed(ErrorCode::kRegistrationRefused, st.message());
  }
}

// prevResult, passed on as the result in the configuration's version.
std::string pass_on(const NetConf& conf) {
  json result = json::parse(conf.prev_result);
  result["cniVersion"] = conf.cni_version;
  return result.dump();
}

}  // namespace

Outcome add(const Invocation& inv, const NetConf& conf) {
  container::RouterSession session;
  if (int err = session.connect_quietly(conf.router); err != 0) return unreachable(conf, err);
  UniqueFd netns(::open(inv.netns.c_str(), O_RDONLY | O_CLOEXEC));
  if (!netns.valid())
    return failed(ErrorCode::kInvalidEnvironment,
                  "CNI_NETNS " + inv.netns + ": " + std::strerror(errno));
  container::HeldContainer c = wanted(inv, conf);
  control::Placement placed;
  bool created = false;
  // Undoes a record this ADD made when the pod is not taken after all: nothing stays
  // half-made, and a record that was there before (the pod's, held by another sandbox)
  // stays.
  const auto unplace = [&] {
    if (created) (void)control::release_container(placed);
  };
  if (!conf.orchestrator.empty()) {
    Outcome failure;
    if (!placement(c, conf, session, &placed, &failure)) return failure;
    uint32_t vip = 0;
    if (Status st = control::place_container(placed, &vip, &c.lid, &created); !st.is_ok()) {
      unplace();
      return orchestrator_failed(st);
    }
  }
  uint16_t lid = 0;
  const int status = session.hold_container(c, netns.get(), &lid);
  // No answer: the router may have taken the pod, so its record stays for a retry or DEL.
  if (status < 0) return unreachable(conf, status);
  if (status != 0) {
    unplace();
    return refused(session, c, status);
  }
  std::fprintf(stderr, "wharf-cni: pod %s registered with %s, LID %u\n", describe(c).c_str(),
               conf.router.c_str(), lid);
  return {true, pass_on(conf), {}};
}

Outcome del(const Invocation& inv, const NetConf& conf) {
  container::RouterSession session;
  if (int err = session.connect_quietly(conf.router); err != 0) {
    // A router that is not running holds nothing (it keeps no registrations across restarts).
    if (err == ENOENT || err == ECONNREFUSED) return {};
    return unreachable(conf, err);
  }
  // What the sandbox holds names the orchestrator's record to delete: another sandbox's pod
  // of the same name (an ADD refused, a pod since restarted) keeps its own.
  container::HeldContainer held;
  held.sandbox = inv.sandbox;
  int status = session.held_container(&held);
  if (status == 0) status = session.release_held_container(inv.sandbox);
  if (status < 0) return unreachable(conf, status);
  if (status == ENOENT) return {};
  if (status != 0)
    return failed(ErrorCode::kRegistrationRefused, "the router could not release sandbox " +
                                                       inv.sandbox + ": " + std::strerror(status));
  if (!conf.orchestrator.empty()) {
    control::Placement placed;
    Outcome failure;
    // DEL must end: without a host name or a token, the record is left (and said so).
    if (!placement(held, conf, session, &placed, &failure)) {
      std::fprintf(stderr, "wharf-cni: pod %s's record at the orchestrator is left: %s\n",
                   describe(held).c_str(), failure.err.msg.c_str());
      return {};
    }
    if (Status st = control::release_container(placed); !st.is_ok()) return orchestrator_failed(st);
  }
  return {};
}

Outcome check(const Invocation& inv, const NetConf& conf) {
  container::RouterSession session;
  if (int err = session.connect_quietly(conf.router); err != 0) return unreachable(conf, err);
  container::HeldContainer held;
  held.sandbox = inv.sandbox;
  const int status = session.held_container(&held);
  if (status < 0) return unreachable(conf, status);
  if (status == ENOENT)
    return failed(
        ErrorCode::kNotRegistered,
        "the router at " + conf.router + " holds no registration for sandbox " + inv.sandbox);
  if (status != 0)
    return failed(ErrorCode::kNotRegistered, "the router at " + conf.router +
                                                 " did not answer for sandbox " + inv.sandbox +
                                                 ": " + std::strerror(status));
  const container::HeldContainer want = wanted(inv, conf);
  if (held.tenant != want.tenant || held.network != want.network || held.name != want.name ||
      held.vip != want.vip)
    return failed(ErrorCode::kRegistrationDiffers, "sandbox " + inv.sandbox + " is registered as " +
                                                       describe(held) + ", not " + describe(want));
  struct stat st;
  if (::stat(inv.netns.c_str(), &st) != 0)
    return failed(ErrorCode::kInvalidEnvironment,
                  "CNI_NETNS " + inv.netns + ": " + std::strerror(errno));
  if (st.st_ino != held.netns_ino)
    return failed(ErrorCode::kRegistrationDiffers,
                  "sandbox " + inv.sandbox +
                      " is registered with another network namespace "
                      "than CNI_NETNS " +
                      inv.netns);
  if (!conf.orchestrator.empty()) {
    control::Placement placed;
    Outcome failure;
    if (!placement(want, conf, session, &placed, &failure)) return failure;
    uint32_t vip = 0;
    std::string host;
    if (Status found = control::find_container(placed, &vip, &host); !found.is_ok())
      return found.code() == Status::Code::kNotFound
                 ? failed(ErrorCode::kNotRegistered, found.message())
                 : orchestrator_failed(found);
    if (vip != want.vip || host != placed.host)
      return failed(ErrorCode::kRegistrationDiffers,
                    "the orchestrator has pod " + want.tenant + "/" + want.name + " at " +
                        format_ipv4(vip) + " on host " + host + ", not " + format_ipv4(want.vip) +
                        " on " + placed.host);
  }
  return {};
}

std::string version_json(const std::string& cni_version) {
  return json{{"cniVersion", cni_version}, {"supportedVersions", kSupportedVersions}}.dump();
}

}  // namespace wharf::cni
