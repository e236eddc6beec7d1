// wharfctl: the operator's command line for the orchestrator, in the grammar of iproute2's
// `rdma` tool: `wharfctl [OPTIONS] OBJECT COMMAND [NAME] [KEY VALUE]...`.
//
//   wharfctl tenant    { add NAME | del NAME | show }
//   wharfctl network   { add NAME tenant T cidr A.B.C.D/N | del NAME tenant T | show tenant T }
//   wharfctl container { add NAME tenant T network N host H [vip A.B.C.D]
//                      | set NAME tenant T host H | del NAME tenant T | show [tenant T] }
//   wharfctl host show
// Options: -j (JSON output), -p (pretty JSON), -o URL (the orchestrator; default
// $WHARF_ORCHESTRATOR or http://127.0.0.1:7480). Exit status 0, 1 for a refused request, 2
// for bad usage.
#include <httplib.h>
#include <stdlib.h>

#include <cstdio>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: wharfctl [-j] [-p] [-o URL] OBJECT COMMAND [NAME] [KEY VALUE]...\n"
    "  tenant    { add NAME | del NAME | show }\n"
    "  network   { add NAME tenant T cidr A.B.C.D/N | del NAME tenant T | show tenant T }\n"
    "  container { add NAME tenant T network N host H [vip A.B.C.D] | set NAME tenant T host H\n"
    "            | del NAME tenant T | show [tenant T] }\n"
    "  host      show\n";

// What a container line shows after its name.
const std::vector<const char*> kContainerFields = {"tenant", "network", "vip", "host", "lid"};

struct Usage {
  std::string message;
};

struct Options {
  bool json_out = false;
  bool pretty = false;
  std::string url;
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
  explicit Client(const Options& o) : opts_(o), http_(o.url) {
    http_.set_connection_timeout(5);
    http_.set_read_timeout(30);
  }

  // Sends the request; on success returns the answer's JSON, else prints the error and exits.
  json call(const std::string& method, const std::string& path, const json& body = nullptr) {
    httplib::Result r = method == "GET"      ? http_.Get(path)
                        : method == "DELETE" ? http_.Delete(path)
                                             : http_.Post(path, body.dump(), "application/json");
    if (!r)
      fail("cannot reach the orchestrator at " + opts_.url + ": " + httplib::to_string(r.error()));
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
  const Options& opts_;
  httplib::Client http_;
};

std::string text(const json& j, const char* key) {
  if (!j.contains(key)) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
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
      auto kv = pairs(args, 3, {"tenant", "host"});
      json moved = c.call("POST", "/v1/tenants/" + kv["tenant"] + "/containers/" + name() + "/move",
                          {{"host", kv["host"]}});
      print(o, json::array({moved}), "container", kContainerFields);
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
  } else if (object == "host") {
    if (cmd == "show") {
      pairs(args, 2, {});
      print(o, c.call("GET", "/v1/hosts"), "host", {"address", "lease"});
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
  o.url = env != nullptr ? env : "http://127.0.0.1:7480";
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
        o.url = argv[++i];
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
