// wharfctl: the operator's command line for the orchestrator, in the grammar of iproute2's
// `rdma` tool: `wharfctl [OPTIONS] OBJECT COMMAND [NAME] [KEY VALUE]...`.
//
//   wharfctl tenant    { add NAME | del NAME | show }
//   wharfctl network   { add NAME tenant T cidr A.B.C.D/N | del NAME tenant T | show tenant T }
//   wharfctl container { add NAME tenant T network N host H [vip A.B.C.D]
//                      | set NAME tenant T [host H] [priority 0-7] | del NAME tenant T
//                      | show [tenant T] }
//   wharfctl quota     { set NAME tenant T [qp N] [cq N] [mr N] [pd N] [srq N] [mr_bytes SIZE]
//                      | del NAME tenant T | show [NAME tenant T | tenant T] }
//   wharfctl ratelimit { set NAME tenant T [rate RATE] [qp_rate RATE] [burst SIZE]
//                      | del NAME tenant T | show [NAME tenant T | tenant T] }
//   wharfctl host show
//   wharfctl token     { add ROLE [tenant T | host H] [name N] [ttl SECONDS] | del ID | show }
//   wharfctl resource show [qp|cq|mr|pd|cm_id] [container NAME] [tenant T]
//   wharfctl statistic show [qp] [container NAME] [tenant T]
//   wharfctl pingmesh show [peer HOST]
// NAME of quota and ratelimit is a container's. ROLE: admin, tenant-admin (needs tenant),
// viewer, host or join (needs host) (control/tokens.h); `token add` prints the new token, whose
// secret the orchestrator does not keep. A quota of "unlimited" and a rate of 0 lift that limit;
// `del` lifts them all. RATE and SIZE in tc's units (control/units.h). Options: -j (JSON output),
// -p (pretty JSON), -o URL (the orchestrator, http:// or https://; default $WHARF_ORCHESTRATOR or
// http://127.0.0.1:7480), --tls-ca FILE (with https://: the CA to verify it against; default
// $WHARF_TLS_CA, else the system's CAs), -t FILE (a file holding the token to present; default
// $WHARF_TOKEN_FILE, else the token $WHARF_TOKEN), -r PATH (for `resource`, `statistic` and
// `pingmesh`: this host's router socket; default $WHARF_ROUTER or /run/wharf/wharfd.sock). Exit
// status 0, 1 for a refused request, 2 for bad usage.
#include <httplib.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/policy.h"
#include "control/api_client.h"
#include "control/credentials.h"
#include "control/units.h"
#include "proto/router_dump.h"

namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: wharfctl [-j] [-p] [-o URL] [--tls-ca FILE] [-t TOKEN_FILE] OBJECT COMMAND [NAME]\n"
    "                [KEY VALUE]...\n"
    "  tenant    { add NAME | del NAME | show }\n"
    "  network   { add NAME tenant T cidr A.B.C.D/N | del NAME tenant T | show tenant T }\n"
    "  container { add NAME tenant T network N host H [vip A.B.C.D]\n"
    "            | set NAME tenant T [host H] [priority 0-7] | del NAME tenant T | show [tenant T] "
    "}\n"
    "  quota     { set NAME tenant T [qp N] [cq N] [mr N] [pd N] [srq N] [mr_bytes SIZE]\n"
    "            | del NAME tenant T | show [NAME tenant T | tenant T] }\n"
    "  ratelimit { set NAME tenant T [rate RATE] [qp_rate RATE] [burst SIZE]\n"
    "            | del NAME tenant T | show [NAME tenant T | tenant T] }\n"
    "  host      show\n"
    "  token     { add ROLE [tenant T | host H] [name N] [ttl SECONDS] | del ID | show }\n"
    "            ROLE: admin, tenant-admin (with tenant), viewer, host, join (with host: one\n"
    "            router's link certificate, once; expires in an hour unless ttl says)\n"
    "  resource  show [qp|cq|mr|pd|cm_id] [container NAME] [tenant T]   (this host's router, -r "
    "PATH)\n"
    "  statistic show [qp] [container NAME] [tenant T]                 (this host's router, -r "
    "PATH)\n"
    "  pingmesh  show [peer HOST]                                       (this host's router, -r "
    "PATH)\n"
    "RATE: 100mbit, 1gbit, 125mbps (bytes) ...; SIZE: 4096, 64kb, 1gb ...\n";

// What a container line shows after its name.
const std::vector<const char*> kContainerFields = {"tenant", "network", "vip",     "host",
                                                   "lid",    "gid",     "priority"};

const std::vector<const char*> kQuotaFields = {"tenant", "qp", "cq", "mr", "pd", "srq", "mr_bytes"};
const std::vector<const char*> kRatelimitFields = {"tenant", "rate", "qp_rate", "burst"};

struct Usage {
  std::string message;
};

struct Options {
  bool json_out = false;
  bool pretty = false;
  wharf::control::ApiEndpoint api;
  std::string token_file;
  std::string router;
};

// The KEY VALUE pairs after the command, checked against what the command takes.
std::map<std::string, std::string> pairs(const std::vector<std::string>& args, size_t from,
                                         const std::set<std::string>& required,
                                         const std::set<std::string>& optional = {}) {
  std::map<std::string, std::string> out;
  for (size_t i = from; i < args.size(); i += 2) {
    const std::string& key = args[i];
    if (required.count(key) == 0 && optional.count(key) == 0)
      throw Usage{"unknown keyword '" + key + "'"};
    if (i + 1 >= args.size()) throw Usage{"'" + key + "' needs a value"};
    if (!out.emplace(key, args[i + 1]).second) throw Usage{"'" + key + "' given twice"};
  }
  for (const std::string& key : required)
    if (out.count(key) == 0) throw Usage{"missing '" + key + " VALUE'"};
  return out;
}

class Client {
 public:
  explicit Client(const Options& o) : opts_(o) {
    const wharf::Status st = wharf::control::check_api_endpoint(o.api);
    if (!st.is_ok()) throw Usage{st.message()};
    std::string token;
    std::string why;
    if (!wharf::control::TokenSource(o.token_file).get(&token, &why)) fail(why);
    http_ = wharf::control::make_api_client(o.api, token, kConnectTimeoutS, kReadTimeoutS);
  }

  // Sends the request; on success returns the answer's JSON, else prints the error and exits.
  json call(const std::string& method, const std::string& path, const json& body = nullptr) {
    httplib::Result r = method == "GET"      ? http_->Get(path)
                        : method == "DELETE" ? http_->Delete(path)
                                             : http_->Post(path, body.dump(), "application/json");
    if (!r)
      fail("cannot reach the orchestrator at " + opts_.api.url + ": " +
           httplib::to_string(r.error()));
    json j = json::parse(r->body, nullptr, false);
    if (r->status != 200) {
      const bool has_error = j.is_object() && j.contains("error") && j["error"].is_string();
      fail(has_error ? j["error"].get<std::string>() : "HTTP " + std::to_string(r->status));
    }
    if (j.is_discarded()) fail("the orchestrator answered something that is not JSON");
    return j;
  }

  [[noreturn]] static void fail(const std::string& why) {
    fprintf(stderr, "wharfctl: %s\n", why.c_str());
    exit(1);
  }

 private:
  static constexpr int kConnectTimeoutS = 5;
  static constexpr int kReadTimeoutS = 30;
  const Options& opts_;
  std::unique_ptr<httplib::Client> http_;
};

// A field as a line shows it; null (a container's LID before its host registers) is "-".
std::string text(const json& j, const char* key) {
  if (!j.contains(key)) return "";
  if (j[key].is_null()) return "-";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

uint64_t rate_arg(const std::string& key, const std::string& value) {
  uint64_t bps = 0;
  std::string why;
  if (!wharf::control::parse_rate(value, &bps, &why)) throw Usage{key + ": " + why};
  return bps;
}

uint64_t size_arg(const std::string& key, const std::string& value) {
  uint64_t bytes = 0;
  std::string why;
  if (!wharf::control::parse_size(value, &bytes, &why)) throw Usage{key + ": " + why};
  return bytes;
}

uint64_t count_arg(const std::string& key, const std::string& value) {
  const uint64_t n = size_arg(key, value);
  if (value.find_first_not_of("0123456789") != std::string::npos)
    throw Usage{key + ": '" + value + "' is not a whole number"};
  return n;
}

// The containers `show` lists: one (NAME tenant T), a tenant's, or all.
json containers_to_show(Client& c, const std::vector<std::string>& args) {
  const bool named = args.size() > 2 && args[2] != "tenant";
  auto kv =
      pairs(args, named ? 3 : 2, named ? std::set<std::string>{"tenant"} : std::set<std::string>{},
            named ? std::set<std::string>{} : std::set<std::string>{"tenant"});
  if (named)
    return json::array({c.call("GET", "/v1/tenants/" + kv["tenant"] + "/containers/" + args[2])});
  return c.call("GET",
                "/v1/containers" + (kv.count("tenant") != 0 ? "?tenant=" + kv["tenant"] : ""));
}

// A container's quota or ratelimit as one line's fields ("qp 4 cq unlimited ...").
json quota_view(const json& container) {
  json v = {{"name", container["name"]}, {"tenant", container["tenant"]}};
  const json q = container.value("quota", json::object());
  for (const char* k : wharf::kQuotaNames) v[k] = q.contains(k) ? q[k] : json("unlimited");
  return v;
}

json ratelimit_view(const json& container) {
  json v = {{"name", container["name"]}, {"tenant", container["tenant"]}};
  const json r = container.value("ratelimit", json::object());
  for (const char* k : {"rate", "qp_rate"})
    v[k] =
        r.contains(k) ? json(wharf::control::format_rate(r[k].get<uint64_t>())) : json("unlimited");
  v["burst"] = r.contains("burst") ? r["burst"] : json("default");
  return v;
}

// Prints objects the way `rdma` does: one line each, "KIND NAME key value ...".
void print(const Options& o, const json& list, const char* kind,
           const std::vector<const char*>& keys) {
  if (o.json_out) {
    printf("%s\n", list.dump(o.pretty ? 2 : -1).c_str());
    return;
  }
  for (const json& item : list) {
    std::string line =
        std::string(kind) + " " + (item.is_string() ? item.get<std::string>() : text(item, "name"));
    if (item.is_object())
      for (const char* k : keys) line += std::string(" ") + k + " " + text(item, k);
    printf("%s\n", line.c_str());
  }
}

// The router's answer to kDumpResources (router/resources.cc), parsed; exits on failure.
json router_dump(const Options& o) {
  std::string dump, error;
  if (!wharf::proto::dump_router_resources(o.router, &dump, &error)) Client::fail(error);
  json all = json::parse(dump, nullptr, false);
  if (!all.is_object()) Client::fail("the router answered something that is not JSON");
  return all;
}

// The items of `kind` in the router's answer that match the [container NAME] [tenant T]
// filter in args[from...].
json router_items(const json& all, const std::string& kind, const std::vector<std::string>& args,
                  size_t from) {
  auto kv = pairs(args, from, {}, {"container", "tenant"});
  json out = json::array();
  for (const json& item : all.value(kind, json::array()))
    if ((kv.count("container") == 0 || item.value("container", "") == kv["container"]) &&
        (kv.count("tenant") == 0 || item.value("tenant", "") == kv["tenant"]))
      out.push_back(item);
  return out;
}

// One line per item in the manner of iproute2's `rdma`: "link wharf0/1", the fields, the
// owning process (with_process), the container and its vIP; or the items as JSON with -j.
void print_links(const Options& o, const json& items, const std::vector<const char*>& fields,
                 bool with_process) {
  if (o.json_out) {
    printf("%s\n", items.dump(o.pretty ? 2 : -1).c_str());
    return;
  }
  for (const json& item : items) {
    std::string line = "link wharf0/1";
    for (const char* k : fields) line += std::string(" ") + k + " " + text(item, k);
    if (with_process)
      for (const char* k : {"pid", "comm"}) line += std::string(" ") + k + " " + text(item, k);
    const std::string tenant = item.value("tenant", "");
    line += " container " + (tenant.empty() ? "" : tenant + "/") + item.value("container", "");
    if (!item.value("vip", "").empty()) line += " vip " + item.value("vip", "");
    printf("%s\n", line.c_str());
  }
}

// `resource show`: the router's objects in `rdma res show`'s manner, one line each, or a
// count of each kind when no kind is named.
int show_resources(const Options& o, const std::vector<std::string>& args) {
  static const std::map<std::string, std::vector<const char*>> kFields = {
      {"qp", {"lqpn", "rqpn", "type", "state", "rq-psn", "sq-psn", "engine", "direct"}},
      {"cq", {"cqe", "users"}},
      {"mr", {"rkey", "lkey", "mrlen"}},
      {"pd", {"users"}},
      {"cm_id", {"cm-idn", "qp-type", "state", "ps", "src-addr", "dst-addr"}},
  };
  size_t from = 2;
  std::string kind;
  if (args.size() > 2 && kFields.count(args[2]) != 0) kind = args[from++];
  const json all = router_dump(o);
  if (!kind.empty()) {
    print_links(o, router_items(all, kind, args, from), kFields.at(kind), true);
    return 0;
  }
  json counts = json::object();
  for (const auto& [k, fields] : kFields) counts[k] = router_items(all, k, args, from).size();
  if (o.json_out) {
    printf("%s\n", counts.dump(o.pretty ? 2 : -1).c_str());
  } else {
    printf("wharf0: pd %s cq %s qp %s mr %s cm_id %s\n", counts["pd"].dump().c_str(),
           counts["cq"].dump().c_str(), counts["qp"].dump().c_str(), counts["mr"].dump().c_str(),
           counts["cm_id"].dump().c_str());
  }
  return 0;
}

// `statistic show`: what the router's containers (or, with `qp`, their live QPs) moved, in
// `rdma statistic show`'s manner. A container's figures include its destroyed QPs.
int show_statistics(const Options& o, const std::vector<std::string>& args) {
  static const std::vector<const char*> kCounters = {"tx_msgs", "tx_bytes", "rx_msgs", "rx_bytes",
                                                     "errors"};
  const bool per_qp = args.size() > 2 && args[2] == "qp";
  const json all = router_dump(o);
  if (per_qp) {
    std::vector<const char*> fields = {"lqpn", "type"};
    fields.insert(fields.end(), kCounters.begin(), kCounters.end());
    print_links(o, router_items(all, "qp", args, 3), fields, true);
  } else {
    print_links(o, router_items(all, "container", args, 2), kCounters, false);
  }
  return 0;
}

// `pingmesh show`: what this host's router knows of its paths to every other router (or to
// `peer`), then within each tenant network it probes: one line each, or with -j the router's
// rows ({"peer", "state", "rtt_p50_us", "rtt_p99_us", "loss", ...; a tenant network's also
// "tenant" and "network"}; docs/OPERATIONS.md lists them).
int show_pingmesh(const Options& o, const std::vector<std::string>& args) {
  auto kv = pairs(args, 2, {}, {"peer"});
  json rows = json::array();
  for (const json& row : router_dump(o).value("pingmesh", json::array()))
    if (kv.count("peer") == 0 || row.value("peer", "") == kv["peer"]) rows.push_back(row);
  if (o.json_out) {
    printf("%s\n", rows.dump(o.pretty ? 2 : -1).c_str());
    return 0;
  }
  for (const json& row : rows) {
    const std::string within = row.contains("network") ? " tenant " + row.value("tenant", "") +
                                                             " network " + row.value("network", "")
                                                       : "";
    printf("peer %s%s state %s rtt_p50 %.1fus rtt_p99 %.1fus peer_delay_p50 %.1fus loss %.3f\n",
           row.value("peer", "").c_str(), within.c_str(), row.value("state", "").c_str(),
           row.value("rtt_p50_us", 0.0), row.value("rtt_p99_us", 0.0),
           row.value("peer_delay_p50_us", 0.0), row.value("loss", 0.0));
  }
  return 0;
}

int run(const Options& o, const std::vector<std::string>& args) {
  if (args.size() < 2) throw Usage{"expected OBJECT COMMAND"};
  const std::string& object = args[0];
  const std::string& cmd = args[1];
  Client c(o);
  auto name = [&]() -> const std::string& {
    if (args.size() < 3) throw Usage{object + " " + cmd + " needs a NAME"};
    return args[2];
  };
  if (object == "tenant") {
    if (cmd == "add") {
      pairs(args, 3, {});
      c.call("POST", "/v1/tenants", {{"name", name()}});
      return 0;
    }
    if (cmd == "del") {
      pairs(args, 3, {});
      c.call("DELETE", "/v1/tenants/" + name());
      return 0;
    }
    if (cmd == "show") {
      pairs(args, 2, {});
      print(o, c.call("GET", "/v1/tenants"), "tenant", {});
      return 0;
    }
  } else if (object == "network") {
    if (cmd == "add") {
      auto kv = pairs(args, 3, {"tenant", "cidr"});
      c.call("POST", "/v1/tenants/" + kv["tenant"] + "/networks",
             {{"name", name()}, {"cidr", kv["cidr"]}});
      return 0;
    }
    if (cmd == "del") {
      auto kv = pairs(args, 3, {"tenant"});
      c.call("DELETE", "/v1/tenants/" + kv["tenant"] + "/networks/" + name());
      return 0;
    }
    if (cmd == "show") {
      auto kv = pairs(args, 2, {"tenant"});
      print(o, c.call("GET", "/v1/tenants/" + kv["tenant"] + "/networks"), "network", {"cidr"});
      return 0;
    }
  } else if (object == "container") {
    if (cmd == "add") {
      auto kv = pairs(args, 3, {"tenant", "network", "host"}, {"vip"});
      json body = {{"name", name()}, {"network", kv["network"]}, {"host", kv["host"]}};
      if (kv.count("vip") != 0) body["vip"] = kv["vip"];
      json made = c.call("POST", "/v1/tenants/" + kv["tenant"] + "/containers", body);
      print(o, json::array({made}), "container", kContainerFields);
      return 0;
    }
    if (cmd == "set") {
      auto kv = pairs(args, 3, {"tenant"}, {"host", "priority"});
      if (kv.size() == 1) throw Usage{"container set needs host or priority"};
      const std::string path = "/v1/tenants/" + kv["tenant"] + "/containers/" + name();
      json now;
      if (kv.count("priority") != 0)
        now =
            c.call("POST", path + "/policy", {{"priority", count_arg("priority", kv["priority"])}});
      if (kv.count("host") != 0) now = c.call("POST", path + "/move", {{"host", kv["host"]}});
      print(o, json::array({now}), "container", kContainerFields);
      return 0;
    }
    if (cmd == "del") {
      auto kv = pairs(args, 3, {"tenant"});
      c.call("DELETE", "/v1/tenants/" + kv["tenant"] + "/containers/" + name());
      return 0;
    }
    if (cmd == "show") {
      auto kv = pairs(args, 2, {}, {"tenant"});
      const std::string q = kv.count("tenant") != 0 ? "?tenant=" + kv["tenant"] : "";
      print(o, c.call("GET", "/v1/containers" + q), "container", kContainerFields);
      return 0;
    }
  } else if (object == "quota" || object == "ratelimit") {
    const bool quota = object == "quota";
    const std::vector<const char*>& fields = quota ? kQuotaFields : kRatelimitFields;
    if (cmd == "set" || cmd == "del") {
      std::set<std::string> keys;
      if (cmd == "set") {
        if (quota)
          keys.insert(wharf::kQuotaNames.begin(), wharf::kQuotaNames.end());
        else
          keys = {"rate", "qp_rate", "burst"};
      }
      auto kv = pairs(args, 3, {"tenant"}, keys);
      json change = {{object, nullptr}};
      if (cmd == "set") {
        if (kv.size() == 1) throw Usage{object + " set needs at least one limit"};
        json group = json::object();
        for (const auto& [key, value] : kv) {
          if (key == "tenant") continue;
          if (quota)
            group[key] = value == "unlimited" ? json(nullptr)
                         : key == "mr_bytes"  ? json(size_arg(key, value))
                                              : json(count_arg(key, value));
          else
            group[key] = key == "burst" ? size_arg(key, value) : rate_arg(key, value);
        }
        change[object] = group;
      }
      json now = c.call("POST", "/v1/tenants/" + kv["tenant"] + "/containers/" + name() + "/policy",
                        change);
      print(o, json::array({quota ? quota_view(now) : ratelimit_view(now)}), object.c_str(),
            fields);
      return 0;
    }
    if (cmd == "show") {
      json out = json::array();
      for (const json& item : containers_to_show(c, args))
        out.push_back(quota ? quota_view(item) : ratelimit_view(item));
      print(o, out, object.c_str(), fields);
      return 0;
    }
  } else if (object == "resource") {
    if (cmd == "show") return show_resources(o, args);
  } else if (object == "statistic") {
    if (cmd == "show") return show_statistics(o, args);
  } else if (object == "pingmesh") {
    if (cmd == "show") return show_pingmesh(o, args);
  } else if (object == "token") {
    static const std::vector<const char*> kTokenFields = {"role", "tenant",  "host",
                                                          "name", "created", "expires"};
    if (cmd == "add") {
      auto kv = pairs(args, 3, {}, {"tenant", "host", "name", "ttl"});
      json body = {{"role", name()}};
      for (const char* k : {"tenant", "host", "name"})
        if (kv.count(k) != 0) body[k] = kv[k];
      if (kv.count("ttl") != 0) body["ttl"] = count_arg("ttl", kv["ttl"]);
      json made = c.call("POST", "/v1/tokens", body);
      if (o.json_out)
        print(o, json::array({made}), "token", {});
      else
        printf("token %s role %s\n%s\n", text(made, "id").c_str(), text(made, "role").c_str(),
               text(made, "token").c_str());
      return 0;
    }
    if (cmd == "del") {
      pairs(args, 3, {});
      c.call("DELETE", "/v1/tokens/" + name());
      return 0;
    }
    if (cmd == "show") {
      pairs(args, 2, {});
      const json list = c.call("GET", "/v1/tokens");
      if (o.json_out) return print(o, list, "token", {}), 0;
      for (const json& t : list) {  // a line is named by the token's id
        std::string line = "token " + text(t, "id");
        for (const char* k : kTokenFields) {
          const std::string v = text(t, k);
          // A tenant or host only where the role has one.
          if (!v.empty() || (std::strcmp(k, "tenant") != 0 && std::strcmp(k, "host") != 0))
            line += std::string(" ") + k + " " + v;
        }
        printf("%s\n", line.c_str());
      }
      return 0;
    }
  } else if (object == "host") {
    if (cmd == "show") {
      pairs(args, 2, {});
      print(o, c.call("GET", "/v1/hosts"), "host",
            {"address", "lid_first", "lid_last", "subnet", "lease"});
      return 0;
    }
  } else {
    throw Usage{"unknown object '" + object + "'"};
  }
  throw Usage{"unknown command '" + cmd + "' for " + object};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const char* env = getenv("WHARF_ORCHESTRATOR");
  o.api.url = env != nullptr ? env : "http://127.0.0.1:7480";
  const char* ca = getenv("WHARF_TLS_CA");
  if (ca != nullptr) o.api.ca_file = ca;
  const char* router = getenv("WHARF_ROUTER");
  o.router = router != nullptr ? router : "/run/wharf/wharfd.sock";
  std::vector<std::string> args;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "-j") {
        o.json_out = true;
      } else if (a == "-p") {
        o.pretty = true;
      } else if (a == "-o") {
        if (i + 1 >= argc) throw Usage{"-o needs a URL"};
        o.api.url = argv[++i];
      } else if (a == "--tls-ca") {
        if (i + 1 >= argc) throw Usage{"--tls-ca needs the CA certificate's path"};
        o.api.ca_file = argv[++i];
      } else if (a == "-t") {
        if (i + 1 >= argc) throw Usage{"-t needs the token file's path"};
        o.token_file = argv[++i];
      } else if (a == "-r") {
        if (i + 1 >= argc) throw Usage{"-r needs the router's socket path"};
        o.router = argv[++i];
      } else if (a == "-h" || a == "--help") {
        fputs(kUsage, stdout);
        return 0;
      } else {
        args.push_back(a);
      }
    }
    return run(o, args);
  } catch (const Usage& u) {
    fprintf(stderr, "wharfctl: %s\n%s", u.message.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    fprintf(stderr, "wharfctl: %s\n", e.what());
    return 1;
  }
}
