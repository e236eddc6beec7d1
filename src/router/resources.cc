// What `wharfctl resource show` and `wharfctl statistic show` list (the router's answer to
// kDumpResources): every QP (with its counters), CQ, MR, PD and rdma_cm id of every session, and
// every container's traffic, with the process and container that own it, as JSON in
// the manner of `rdma -j res show`. Control path only.
#include <arpa/inet.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <spdlog/fmt/fmt.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/clock.h"
#include "common/ipv4.h"
#include "router/remote.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

using nlohmann::json;

const char* qp_type_name(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    case IBV_QPT_XRC_SEND: return "XRC_INI";
    case IBV_QPT_XRC_RECV: return "XRC_TGT";
    case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
    default: return "?";
  }
}

const char* qp_state_name(ibv_qp_state s) {
  static const char* const kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return s >= 0 && s <= IBV_QPS_ERR ? kNames[s] : "?";
}

const char* port_space_name(uint16_t ps) {
  switch (ps) {
    case RDMA_PS_TCP: return "TCP";
    case RDMA_PS_UDP: return "UDP";
    case RDMA_PS_IB: return "IB";
    case RDMA_PS_IPOIB: return "IPOIB";
    default: return "?";
  }
}

// Where a QP's transport stands: its next PSN to send and the PSN it expects, and whether
// the host-to-host engine holds state for it ("engaged"), gave it back while the QP is quiet
// ("parked", router/remote.h) or never had any ("none": its peer is on this host, or it
// has not moved anything to another host yet).
struct QpEngineView {
  uint32_t sq_psn, rq_psn;
  const char* name;
};
QpEngineView engine_view(const Qp& qp) {
  if (qp.remote != nullptr)
    return {qp.remote->requester.next_psn(), qp.remote->responder.epsn(), "engaged"};
  if (qp.parked_remote.parked) return {qp.parked_remote.next_psn, qp.parked_remote.epsn, "parked"};
  return {qp.attr.sq_psn, qp.attr.rq_psn, "none"};
}

// "a.b.c.d:port" or "[v6]:port", as `rdma res show cm_id` prints addresses.
std::string format_cm_address(const CmAddress& a) {
  if (a.family == proto::kCmAfNone) return "";
  char ip[INET6_ADDRSTRLEN] = "";
  inet_ntop(a.family == proto::kCmAf4 ? AF_INET : AF_INET6, a.ip.data(), ip, sizeof(ip));
  return a.family == proto::kCmAf4 ? fmt::format("{}:{}", ip, a.port)
                                   : fmt::format("[{}]:{}", ip, a.port);
}

std::string comm_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(f, comm);
  return comm;
}

json traffic_json(const Traffic& t) {
  return {{"tx_msgs", t.tx_msgs},   {"tx_bytes", t.tx_bytes}, {"rx_msgs", t.rx_msgs},
          {"rx_bytes", t.rx_bytes}, {"errors", t.errors},     {"express_msgs", t.express_msgs}};
}

// Microseconds, to a tenth.
double us(uint64_t ns) { return std::round(static_cast<double>(ns) / 100.0) / 10.0; }

// Pingmesh's view (`wharfctl pingmesh show`): a row per peer, the routers' own first, then
// (with_networks) those within each tenant network it probes, which name their "tenant" and
// "network"; [] when it does not probe.
json pingmesh_rows(const RemotePath* remote, bool with_networks) {
  json rows = json::array();
  if (remote == nullptr) return rows;
  const auto& hosts = remote->directory().hosts();
  remote->for_each_pingmesh_peer(with_networks,
                                 [&](const std::string& tenant, const std::string& network,
                                     const pingmesh::Mesh& mesh, int h) {
                                   const pingmesh::PeerSummary s = mesh.summary(h);
                                   const pingmesh::PeerTotals& t = mesh.totals(h);
                                   json row = {{"peer", hosts[static_cast<size_t>(h)].name},
                                               {"state", pingmesh::state_name(s.state)},
                                               {"rtt_p50_us", us(s.rtt_p50_ns)},
                                               {"rtt_p99_us", us(s.rtt_p99_ns)},
                                               {"rtt_min_us", us(s.rtt_min_ns)},
                                               {"rtt_max_us", us(s.rtt_max_ns)},
                                               {"peer_delay_p50_us", us(s.peer_delay_p50_ns)},
                                               {"peer_delay_p99_us", us(s.peer_delay_p99_ns)},
                                               {"loss", s.loss},
                                               {"answered", s.answered},
                                               {"lost", s.lost},
                                               {"probes_total", t.probes},
                                               {"lost_total", t.lost},
                                               {"interval_ms", mesh.interval_ns() / 1000000}};
                                   if (!network.empty())
                                     row.update({{"tenant", tenant}, {"network", network}});
                                   rows.push_back(std::move(row));
                                 });
  return rows;
}

}  // namespace

std::string Router::describe_resources_st() const {
  json qps = json::array(), cqs = json::array(), mrs = json::array(), pds = json::array(),
       cm_ids = json::array(), containers = json::array();
  for (const auto& [fd, s] : sessions_) {
    const Container* c = s->container();
    const json owner = {{"pid", s->pid()},
                        {"comm", comm_of(s->pid())},
                        {"tenant", c->tenant},
                        {"container", c->name},
                        {"vip", c->vip == 0 ? "" : format_ipv4(c->vip)}};
    auto with_owner = [&](json j) {
      j.update(owner);
      return j;
    };
    s->qps_.for_each([&](const Qp* qp) {
      Traffic t;
      t.add(*qp->counters());
      const QpEngineView engine = engine_view(*qp);
      json j = with_owner({{"lqpn", qp->qpn},
                           {"rqpn", qp->attr.dest_qp_num},
                           {"type", qp_type_name(qp->type)},
                           {"state", qp_state_name(qp->state())},
                           {"rq-psn", engine.rq_psn},
                           {"sq-psn", engine.sq_psn},
                           {"engine", engine.name},
                           {"direct", qp->direct_on},
                           {"express", qp->has_express_line()}});
      j.update(traffic_json(t));
      qps.push_back(j);
    });
    for (const auto& [h, cq] : s->cqs_)
      cqs.push_back(with_owner({{"cqe", cq->layout.entries}, {"users", cq->users}}));
    for (const auto& [h, mr] : s->mrs_)
      mrs.push_back(with_owner({{"lkey", mr->key}, {"rkey", mr->key}, {"mrlen", mr->length}}));
    for (const auto& [h, pd] : s->pds_) pds.push_back(with_owner({{"users", pd->users}}));
    for (const auto& [h, id] : s->cm_ids_) {
      cm_ids.push_back(with_owner({{"cm-idn", id->handle},
                                   {"qp-type", qp_type_name(static_cast<ibv_qp_type>(id->qp_type))},
                                   {"state", cm_state_name(id->state)},
                                   {"ps", port_space_name(id->ps)},
                                   {"src-addr", format_cm_address(id->local)},
                                   {"dst-addr", format_cm_address(id->remote)}}));
    }
  }
  for (const ContainerUsage& u : container_usage_st(false)) {
    const Container* c = u.live;
    json j = {{"tenant", c->tenant},
              {"container", c->name},
              {"vip", c->vip == 0 ? "" : format_ipv4(c->vip)},
              {"lid", c->lid}};
    j.update(traffic_json(u.traffic));
    containers.push_back(j);
  }
  return json{{"qp", qps},
              {"cq", cqs},
              {"mr", mrs},
              {"pd", pds},
              {"cm_id", cm_ids},
              {"container", containers},
              {"pingmesh", pingmesh_rows(remote_.get(), true)}}
      .dump();
}

std::string Router::describe_report_st() const {
  json containers = json::array();
  for (const ContainerUsage& u : container_usage_st(false)) {
    json objects = json::object(), quota = json::object();
    for (size_t k = 0; k < kQuotaKinds; ++k) {
      objects[kQuotaNames[k]] = u.held[k];
      const uint64_t limit = u.live->policy.limit(static_cast<QuotaKind>(k));
      if (limit != ContainerPolicy::kUnlimited) quota[kQuotaNames[k]] = limit;
    }
    containers.push_back({{"tenant", u.tenant},
                          {"network", u.network},
                          {"container", u.name},
                          {"tx_bytes", u.traffic.tx_bytes},
                          {"rx_bytes", u.traffic.rx_bytes},
                          {"tx_msgs", u.traffic.tx_msgs},
                          {"rx_msgs", u.traffic.rx_msgs},
                          {"objects", objects},
                          {"quota", quota}});
  }
  // The cluster's matrix is between routers: the tenant networks' rows stay here.
  return json{{"pingmesh", pingmesh_rows(remote_.get(), false)}, {"containers", containers}}.dump();
}

std::vector<Router::QpUsage> Router::qp_usage_st() const {
  std::vector<QpUsage> out;
  for (const auto& [fd, s] : sessions_) {
    const Container* c = s->container();
    s->qps_.for_each([&out, c](const Qp* qp) {
      Traffic t;
      t.add(*qp->counters());
      out.push_back({c, qp->qpn, qp_type_name(qp->type), t});
    });
  }
  return out;
}

std::vector<Router::ContainerUsage> Router::container_usage_st(bool departed) const {
  std::map<const Container*, ContainerUsage> live;
  const auto usage_of = [&live](const Container* c) -> ContainerUsage& {
    ContainerUsage& u = live[c];
    if (u.live == nullptr) {
      u = {c->tenant, c->network, c->name, c, c->retired, {}};
      u.traffic.throttled_ns = c->throttled_ns;
    }
    return u;
  };
  for (const auto& [ino, c] : containers_) usage_of(c.get());
  for (const auto& [fd, s] : sessions_) {
    ContainerUsage& u = usage_of(s->container());
    s->qps_.for_each([&u](const Qp* qp) { u.traffic.add(*qp->counters()); });
    for (size_t k = 0; k < kQuotaKinds; ++k) u.held[k] += held_st(*s, static_cast<QuotaKind>(k));
  }
  std::vector<ContainerUsage> out;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> by_name;
  for (auto& [c, u] : live) {
    by_name.emplace(std::tuple(u.tenant, u.network, u.name), out.size());
    out.push_back(std::move(u));
  }
  if (!departed) return out;
  const uint64_t now = now_ns();
  for (const Departed& d : departed_) {
    if (d.gone_ns + kDepartedNs < now) continue;
    const auto [at, fresh] = by_name.emplace(std::tuple(d.tenant, d.network, d.name), out.size());
    if (fresh) out.push_back({d.tenant, d.network, d.name, nullptr, {}, {}});
    out[at->second].traffic.add(d.traffic);
  }
  return out;
}

int Session::on_dump_resources(const proto::Empty&, UniqueFd*, int, proto::DumpResourcesRep* rep,
                               ReplyFds* out) {
  if (uid_ != 0) return EPERM;  // it shows every container's objects
  const std::string text = router_->describe_resources_st();
  UniqueFd fd(memfd_create("wharf-resources", MFD_CLOEXEC));
  if (!fd.valid()) return errno;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd.get(), text.data() + done, text.size() - done);
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  rep->bytes = text.size();
  dump_ = std::move(fd);  // kept until the reply is sent (and the next dump)
  out->add(dump_.get());
  return 0;
}

}  // namespace wharf::router
