#include "control/registry.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "control/policy_json.h"

namespace wharf::control {
namespace {

using Code = Status::Code;
using nlohmann::json;

constexpr int kRaceRetries = 64;  // compare-and-set attempts before giving up
// After losing a claim, the next attempt takes one of this many lowest free values at random,
// so that racing creators (orchestrators, or one orchestrator's clients) stop all reaching
// for the same one; an uncontended claim always gets the lowest.
constexpr size_t kSpreadAfterCollision = 32;

// The value a claim tries on attempt `attempt`: the lowest of the free `candidates` (in
// increasing order, at most kSpreadAfterCollision of them) first, then a random one.
uint32_t pick_free(const std::vector<uint32_t>& candidates, int attempt) {
  if (attempt == 0 || candidates.size() == 1) return candidates.front();
  thread_local std::minstd_rand rng(std::random_device{}());
  return candidates[rng() % candidates.size()];
}

const std::string kTenants = "/wharf/tenant/";
const std::string kNetworks = "/wharf/network/";
const std::string kContainers = Registry::kContainerPrefix;
const std::string kIps = "/wharf/ip/";
const std::string kLids = "/wharf/lid/";
const std::string kHosts = "/wharf/host/";
constexpr int64_t kMaxHostTtl = 3600;

}  // namespace

bool Registry::valid_name(const std::string& s) {
  if (s.empty() || s.size() > 63 || s[0] == '.' || s[0] == '-' || s[0] == '_') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
      return false;
  return true;
}

namespace {

Status bad_name(const char* what, const std::string& s) {
  return Status::error(Code::kInvalidArgument,
                       std::string(what) + " name '" + s + "': use 1-63 of [a-z0-9._-]");
}

std::string tenant_key(const std::string& t) { return kTenants + t; }
std::string network_key(const std::string& t, const std::string& n) {
  return kNetworks + t + "/" + n;
}
std::string container_key(const std::string& t, const std::string& c) {
  return kContainers + t + "/" + c;
}
std::string ip_prefix(const std::string& t, const std::string& n) {
  return kIps + t + "/" + n + "/";
}
std::string ip_key(const std::string& t, const std::string& n, uint32_t ip) {
  return ip_prefix(t, n) + format_ipv4(ip);
}
std::string lid_key(uint16_t lid) { return kLids + std::to_string(lid); }
std::string host_key(const std::string& h) { return kHosts + h; }

// What the store holds is trusted only as far as it parses: a value that does not is kInternal.
bool parse_network(const KeyValue& kv, const std::string& tenant, NetworkInfo* out) {
  json j = json::parse(kv.value, nullptr, false);
  if (!j.is_object() || !j.contains("cidr") || !j["cidr"].is_string()) return false;
  out->tenant = tenant;
  out->name = kv.key.substr(kv.key.rfind('/') + 1);
  return parse_cidr(j["cidr"].get<std::string>(), &out->cidr);
}

bool valid_lid_range(uint64_t first, uint64_t last) {
  return first >= 1 && first <= last && last <= Registry::kMaxLid;
}

// A network's or a host's container subnet: /8 to /30.
bool valid_subnet(const Cidr& c) { return c.prefix >= 8 && c.prefix <= 30; }

}  // namespace

void Registry::host_to_json(const HostInfo& h, json* object) {
  (*object)["address"] = format_ipv4(h.address);
  (*object)["lid_first"] = h.lid_first;
  (*object)["lid_last"] = h.lid_last;
  (*object)["subnet"] = h.subnet.prefix != 0 ? json(format_cidr(h.subnet)) : json(nullptr);
}

bool Registry::host_from_json(const json& j, HostInfo* out) {
  if (!j.is_object() || !j.contains("address") || !j["address"].is_string() ||
      !j.contains("lid_first") || !j["lid_first"].is_number_unsigned() || !j.contains("lid_last") ||
      !j["lid_last"].is_number_unsigned())
    return false;
  const uint64_t first = j["lid_first"].get<uint64_t>();
  const uint64_t last = j["lid_last"].get<uint64_t>();
  if (first > 0xffff || last > 0xffff) return false;
  out->subnet = Cidr{};
  if (auto it = j.find("subnet"); it != j.end() && !it->is_null())
    if (!it->is_string() || !parse_cidr(it->get<std::string>(), &out->subnet)) return false;
  out->lid_first = static_cast<uint16_t>(first);
  out->lid_last = static_cast<uint16_t>(last);
  return parse_ipv4(j["address"].get<std::string>(), &out->address);
}

bool Registry::decode_host(const KeyValue& kv, HostInfo* out) {
  if (kv.key.rfind(kHosts, 0) != 0) return false;
  if (!host_from_json(json::parse(kv.value, nullptr, false), out)) return false;
  if (!valid_lid_range(out->lid_first, out->lid_last)) return false;
  if (out->subnet.prefix != 0 && !valid_subnet(out->subnet)) return false;
  out->name = kv.key.substr(kHosts.size());
  out->lease = kv.lease;
  return true;
}

bool Registry::split_container_key(const std::string& key, std::string* tenant, std::string* name) {
  if (key.rfind(kContainers, 0) != 0) return false;
  const std::string rest = key.substr(kContainers.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return false;
  *tenant = rest.substr(0, slash);
  *name = rest.substr(slash + 1);
  return true;
}

bool Registry::decode_container(const KeyValue& kv, ContainerInfo* out) {
  json j = json::parse(kv.value, nullptr, false);
  if (!j.is_object() || !split_container_key(kv.key, &out->tenant, &out->name)) return false;
  if (!j.contains("network") || !j["network"].is_string() || !j.contains("host") ||
      !j["host"].is_string() || !j.contains("vip") || !j["vip"].is_string() || !j.contains("lid") ||
      !j["lid"].is_number_unsigned())
    return false;
  out->network = j["network"].get<std::string>();
  out->host = j["host"].get<std::string>();
  const uint64_t lid = j["lid"].get<uint64_t>();
  if (lid > Registry::kMaxLid) return false;
  out->lid = static_cast<uint16_t>(lid);
  return parse_ipv4(j["vip"].get<std::string>(), &out->vip) && policy_from_json(j, &out->policy);
}

namespace {

std::string encode(const ContainerInfo& c) {
  json j = {{"network", c.network}, {"host", c.host}, {"vip", format_ipv4(c.vip)}, {"lid", c.lid}};
  policy_to_json(c.policy, &j);
  return j.dump();
}

Status corrupt(const std::string& key) {
  return Status::error(Code::kInternal, "store entry " + key + " does not parse");
}

// Every entry under `prefix`, each read by decode(kv, &item) (false: corrupt, kInternal).
template <class T, class Decode>
Status read_all(KvStore* store, const std::string& prefix, Decode decode, std::vector<T>* out) {
  std::vector<KeyValue> kvs;
  int64_t rev = 0;
  Status st = store->range(prefix, &kvs, &rev);
  out->clear();
  for (const KeyValue& kv : kvs) {
    T item;
    if (!decode(kv, &item)) return corrupt(kv.key);
    out->push_back(std::move(item));
  }
  return st;
}

// A host address a container may have: not the network or broadcast address, not .1.
bool assignable(const Cidr& c, uint32_t ip) {
  if (!c.contains(ip)) return false;
  if (c.prefix >= 31) return true;  // RFC 3021 point-to-point and single hosts
  const uint32_t offset = ip - c.base;
  return offset > 1 && offset < c.size() - 1;
}

}  // namespace

Status Registry::add_tenant(const std::string& tenant) {
  if (!valid_name(tenant)) return bad_name("tenant", tenant);
  bool ok = false;
  int64_t rev = 0;
  Status st = store_->txn({Compare::absent(tenant_key(tenant))},
                          {TxnOp::put(tenant_key(tenant), "{}")}, &ok, &rev);
  if (st.is_ok() && !ok) return Status::error(Code::kAlreadyExists, "tenant " + tenant + " exists");
  return st;
}

Status Registry::del_tenant(const std::string& tenant) {
  KeyValue kv;
  Status st = store_->get(tenant_key(tenant), &kv);
  if (!st.is_ok())
    return st.code() == Code::kNotFound ? Status::error(Code::kNotFound, "no tenant " + tenant)
                                        : st;
  std::vector<KeyValue> nets;
  int64_t rev = 0;
  st = store_->range(kNetworks + tenant + "/", &nets, &rev);
  if (!st.is_ok()) return st;
  if (!nets.empty())
    return Status::error(Code::kFailedPrecondition, "tenant " + tenant + " still has networks");
  // A network created since the range would be orphaned: only delete what we looked at.
  bool ok = false;
  st = store_->txn({Compare::mod_revision_is(tenant_key(tenant), kv.mod_revision)},
                   {TxnOp::del(tenant_key(tenant))}, &ok, &rev);
  if (st.is_ok() && !ok)
    return Status::error(Code::kUnavailable, "tenant changed meanwhile; retry");
  return st;
}

Status Registry::list_tenants(std::vector<std::string>* out) {
  std::vector<KeyValue> kvs;
  int64_t rev = 0;
  Status st = store_->range(kTenants, &kvs, &rev);
  out->clear();
  for (const KeyValue& kv : kvs) out->push_back(kv.key.substr(kTenants.size()));
  return st;
}

Status Registry::add_network(const std::string& tenant, const std::string& name,
                             const std::string& cidr_text) {
  if (!valid_name(name)) return bad_name("network", name);
  Cidr cidr;
  if (!parse_cidr(cidr_text, &cidr))
    return Status::error(Code::kInvalidArgument,
                         "CIDR '" + cidr_text + "': expected A.B.C.D/N with the host bits zero");
  if (!valid_subnet(cidr))
    return Status::error(Code::kInvalidArgument, "CIDR '" + cidr_text + "': use /8 to /30");
  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    KeyValue t;
    Status st = store_->get(tenant_key(tenant), &t);
    if (st.code() == Code::kNotFound) return Status::error(Code::kNotFound, "no tenant " + tenant);
    if (!st.is_ok()) return st;
    std::vector<NetworkInfo> nets;
    if (st = list_networks(tenant, &nets); !st.is_ok()) return st;
    for (const NetworkInfo& n : nets) {
      if (n.name == name) return Status::error(Code::kAlreadyExists, "network " + name + " exists");
      if (overlaps(n.cidr, cidr))
        return Status::error(Code::kAlreadyExists, "CIDR " + cidr_text + " overlaps network " +
                                                       n.name + " (" + format_cidr(n.cidr) + ")");
    }
    // The tenant's record is rewritten with every new network, so two racing additions
    // (whose overlap checks both passed) cannot both commit.
    bool ok = false;
    int64_t rev = 0;
    st = store_->txn(
        {Compare::mod_revision_is(tenant_key(tenant), t.mod_revision),
         Compare::absent(network_key(tenant, name))},
        {TxnOp::put(tenant_key(tenant), t.value),
         TxnOp::put(network_key(tenant, name), json{{"cidr", format_cidr(cidr)}}.dump())},
        &ok, &rev);
    if (!st.is_ok() || ok) return st;
  }
  return Status::error(Code::kUnavailable, "too many concurrent changes; retry");
}

Status Registry::del_network(const std::string& tenant, const std::string& name) {
  std::vector<KeyValue> ips;
  int64_t rev = 0;
  Status st = store_->range(ip_prefix(tenant, name), &ips, &rev);
  if (!st.is_ok()) return st;
  if (!ips.empty())
    return Status::error(Code::kFailedPrecondition, "network " + name + " still has containers");
  bool deleted = false;
  st = store_->del(network_key(tenant, name), &deleted, &rev);
  if (st.is_ok() && !deleted) return Status::error(Code::kNotFound, "no network " + name);
  return st;
}

Status Registry::list_networks(const std::string& tenant, std::vector<NetworkInfo>* out) {
  return read_all(
      store_, kNetworks + tenant + "/",
      [&](const KeyValue& kv, NetworkInfo* n) { return parse_network(kv, tenant, n); }, out);
}

Status Registry::add_host(const HostInfo& h, int64_t ttl_seconds, int64_t* lease) {
  if (!valid_name(h.name)) return bad_name("host", h.name);
  if (!valid_lid_range(h.lid_first, h.lid_last))
    return Status::error(Code::kInvalidArgument,
                         "LIDs " + std::to_string(h.lid_first) + "-" + std::to_string(h.lid_last) +
                             ": use a range within 1-" + std::to_string(kMaxLid));
  if (ttl_seconds < 1 || ttl_seconds > kMaxHostTtl)
    return Status::error(Code::kInvalidArgument,
                         "ttl: use 1-" + std::to_string(kMaxHostTtl) + " seconds");
  if (h.subnet.prefix != 0 && !valid_subnet(h.subnet))
    return Status::error(Code::kInvalidArgument,
                         "subnet " + format_cidr(h.subnet) + ": use /8 to /30");
  Status st = store_->grant_lease(ttl_seconds, lease);
  if (!st.is_ok()) return st;
  json record = json::object();
  host_to_json(h, &record);
  int64_t rev = 0;
  return store_->put(host_key(h.name), record.dump(), *lease, &rev);
}

Status Registry::list_hosts(std::vector<HostInfo>* out) {
  return read_all(store_, kHosts, decode_host, out);
}

Status Registry::find_host(const std::string& name, HostInfo* out, const HostInfo** found) {
  *found = nullptr;
  KeyValue kv;
  Status st = store_->get(host_key(name), &kv);
  if (st.code() == Code::kNotFound) return Status::ok();
  if (!st.is_ok()) return st;
  if (!decode_host(kv, out)) return corrupt(kv.key);
  *found = out;
  return Status::ok();
}

Status Registry::lid_on_host(const HostInfo* h, uint16_t current, bool same_host, int attempt,
                             uint16_t* lid) {
  if (h == nullptr) {
    *lid = same_host ? current : 0;
    return Status::ok();
  }
  if (current >= h->lid_first && current <= h->lid_last) {
    *lid = current;
    return Status::ok();
  }
  std::vector<KeyValue> taken;
  int64_t rev = 0;
  if (Status st = store_->range(kLids, &taken, &rev); !st.is_ok()) return st;
  std::set<uint32_t> used;
  for (const KeyValue& kv_taken : taken) {
    const std::string digits = kv_taken.key.substr(kLids.size());
    uint32_t taken_lid = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), taken_lid);
    if (ec == std::errc() && end == digits.data() + digits.size()) used.insert(taken_lid);
  }
  std::vector<uint32_t> free;
  for (uint32_t l = h->lid_first; l <= h->lid_last && free.size() < kSpreadAfterCollision; ++l)
    if (used.count(l) == 0) free.push_back(l);
  if (free.empty())
    return Status::error(Code::kExhausted, "host " + h->name + " has no free LID (its range is " +
                                               std::to_string(h->lid_first) + "-" +
                                               std::to_string(h->lid_last) + ")");
  *lid = static_cast<uint16_t>(pick_free(free, attempt));
  return Status::ok();
}

Status Registry::add_container(const std::string& tenant, const std::string& network,
                               const std::string& name, const std::string& host, uint32_t vip,
                               ContainerInfo* out) {
  if (!valid_name(name)) return bad_name("container", name);
  if (!valid_name(host)) return bad_name("host", host);
  KeyValue nkv;
  Status st = store_->get(network_key(tenant, network), &nkv);
  if (st.code() == Code::kNotFound)
    return Status::error(Code::kNotFound, "no network " + network + " in tenant " + tenant);
  if (!st.is_ok()) return st;
  NetworkInfo net;
  if (!parse_network(nkv, tenant, &net)) return corrupt(nkv.key);
  if (vip != 0 && !assignable(net.cidr, vip))
    return Status::error(Code::kInvalidArgument,
                         format_ipv4(vip) + " is not a host address of " + format_cidr(net.cidr));
  ContainerInfo c{tenant, name, network, host, vip, 0};
  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    HostInfo h;
    const HostInfo* registered = nullptr;
    if (st = find_host(host, &h, &registered); !st.is_ok()) break;
    // The addresses to pick from: the network's, within the host's subnet when it has one
    // (other hosts' routers send there by subnet when the orchestrator is away).
    Cidr block = net.cidr;
    if (vip == 0 && registered != nullptr && h.subnet.prefix != 0) {
      if (!overlaps(net.cidr, h.subnet)) {
        st = Status::error(Code::kFailedPrecondition,
                           "network " + network + " (" + format_cidr(net.cidr) +
                               ") has no address in host " + host + "'s container subnet " +
                               format_cidr(h.subnet));
        break;
      }
      if (h.subnet.prefix > block.prefix) block = h.subnet;
    }
    if (st = lid_on_host(registered, 0, false, attempt, &c.lid); !st.is_ok()) break;
    if (vip == 0) {  // the lowest free address (see pick_free)
      std::vector<KeyValue> taken;
      int64_t rev = 0;
      if (st = store_->range(ip_prefix(tenant, network), &taken, &rev); !st.is_ok()) break;
      std::set<uint32_t> used;
      for (const KeyValue& kv : taken) {
        uint32_t ip = 0;
        if (parse_ipv4(kv.key.substr(ip_prefix(tenant, network).size()), &ip)) used.insert(ip);
      }
      std::vector<uint32_t> free;
      for (uint32_t ip = block.base;
           ip < block.base + block.size() && free.size() < kSpreadAfterCollision; ++ip)
        if (assignable(net.cidr, ip) && assignable(block, ip) && used.count(ip) == 0)
          free.push_back(ip);
      if (free.empty()) {
        st = Status::error(
            Code::kExhausted,
            "network " + network + " has no free address" +
                (block.prefix != net.cidr.prefix
                     ? " in host " + host + "'s container subnet " + format_cidr(block)
                     : std::string()));
        break;
      }
      c.vip = pick_free(free, attempt);
    }
    std::vector<Compare> when = {Compare::mod_revision_is(nkv.key, nkv.mod_revision),
                                 Compare::absent(container_key(tenant, name)),
                                 Compare::absent(ip_key(tenant, network, c.vip))};
    std::vector<TxnOp> ops = {TxnOp::put(container_key(tenant, name), encode(c)),
                              TxnOp::put(ip_key(tenant, network, c.vip), name)};
    if (c.lid != 0) {
      when.push_back(Compare::absent(lid_key(c.lid)));
      ops.push_back(TxnOp::put(lid_key(c.lid), tenant + "/" + name));
    }
    bool ok = false;
    int64_t rev = 0;
    if (st = store_->txn(when, ops, &ok, &rev); !st.is_ok()) break;
    if (ok) {
      *out = c;
      return Status::ok();
    }
    KeyValue existing;
    if (store_->get(container_key(tenant, name), &existing).is_ok()) {
      st = Status::error(Code::kAlreadyExists, "container " + name + " exists");
      break;
    }
    if (vip != 0 && store_->get(ip_key(tenant, network, vip), &existing).is_ok()) {
      st = Status::error(Code::kAlreadyExists, format_ipv4(vip) + " is taken");
      break;
    }
    // Otherwise another claim took the address or the LID first (or the network changed):
    // look again.
  }
  if (st.is_ok()) st = Status::error(Code::kUnavailable, "too many concurrent claims; retry");
  return st;
}

Status Registry::read_container(const std::string& tenant, const std::string& name, KeyValue* kv,
                                ContainerInfo* out) {
  Status st = store_->get(container_key(tenant, name), kv);
  if (st.code() == Code::kNotFound)
    return Status::error(Code::kNotFound, "no container " + name + " in tenant " + tenant);
  if (!st.is_ok()) return st;
  return decode_container(*kv, out) ? Status::ok() : corrupt(kv->key);
}

Status Registry::get_container(const std::string& tenant, const std::string& name,
                               ContainerInfo* out) {
  KeyValue kv;
  return read_container(tenant, name, &kv, out);
}

Status Registry::move_container(const std::string& tenant, const std::string& name,
                                const std::string& host, ContainerInfo* out) {
  if (!valid_name(host)) return bad_name("host", host);
  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    KeyValue kv;
    ContainerInfo c;
    Status st = read_container(tenant, name, &kv, &c);
    if (!st.is_ok()) return st;
    HostInfo h;
    const HostInfo* registered = nullptr;
    if (st = find_host(host, &h, &registered); !st.is_ok()) return st;
    const uint16_t old_lid = c.lid;
    if (st = lid_on_host(registered, old_lid, c.host == host, attempt, &c.lid); !st.is_ok())
      return st;
    c.host = host;
    std::vector<Compare> when = {Compare::mod_revision_is(kv.key, kv.mod_revision)};
    std::vector<TxnOp> ops = {TxnOp::put(kv.key, encode(c))};
    if (c.lid != old_lid) {
      if (old_lid != 0) ops.push_back(TxnOp::del(lid_key(old_lid)));
      if (c.lid != 0) {
        when.push_back(Compare::absent(lid_key(c.lid)));
        ops.push_back(TxnOp::put(lid_key(c.lid), tenant + "/" + name));
      }
    }
    bool ok = false;
    int64_t rev = 0;
    if (st = store_->txn(when, ops, &ok, &rev); !st.is_ok()) return st;
    if (ok) {
      *out = c;
      return Status::ok();
    }
  }
  return Status::error(Code::kUnavailable, "too many concurrent changes; retry");
}

Status Registry::update_policy(const std::string& tenant, const std::string& name,
                               const std::function<Status(ContainerPolicy*)>& edit,
                               ContainerInfo* out) {
  return rewrite_container(
      tenant, name, [&](ContainerInfo* c) { return edit(&c->policy); }, out);
}

Status Registry::rewrite_container(const std::string& tenant, const std::string& name,
                                   const std::function<Status(ContainerInfo*)>& edit,
                                   ContainerInfo* out) {
  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    KeyValue kv;
    ContainerInfo c;
    Status st = read_container(tenant, name, &kv, &c);
    if (!st.is_ok()) return st;
    if (st = edit(&c); !st.is_ok()) return st;
    bool ok = false;
    int64_t rev = 0;
    st = store_->txn({Compare::mod_revision_is(kv.key, kv.mod_revision)},
                     {TxnOp::put(kv.key, encode(c))}, &ok, &rev);
    if (!st.is_ok()) return st;
    if (ok) {
      *out = c;
      return Status::ok();
    }
  }
  return Status::error(Code::kUnavailable, "too many concurrent changes; retry");
}

Status Registry::del_container(const std::string& tenant, const std::string& name) {
  for (int attempt = 0; attempt < kRaceRetries; ++attempt) {
    KeyValue kv;
    ContainerInfo c;
    Status st = read_container(tenant, name, &kv, &c);
    if (!st.is_ok()) return st;
    std::vector<TxnOp> ops = {TxnOp::del(kv.key), TxnOp::del(ip_key(tenant, c.network, c.vip))};
    if (c.lid != 0) ops.push_back(TxnOp::del(lid_key(c.lid)));
    bool ok = false;
    int64_t rev = 0;
    st = store_->txn({Compare::mod_revision_is(kv.key, kv.mod_revision)}, ops, &ok, &rev);
    if (!st.is_ok() || ok) return st;
  }
  return Status::error(Code::kUnavailable, "too many concurrent changes; retry");
}

Status Registry::list_containers(const std::string& tenant, std::vector<ContainerInfo>* out) {
  return read_all(store_, tenant.empty() ? kContainers : kContainers + tenant + "/",
                  decode_container, out);
}

}  // namespace wharf::control
