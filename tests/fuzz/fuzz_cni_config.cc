// Fuzz target for tools/wharf-cni/netconf.h: the configuration a runtime writes to the
// plugin's stdin (with a prevResult made by earlier plugins) and CNI_ARGS (hostile: a pod's
// annotations and a user's conflist reach both).
//
// Checked for every input, read as each command: an accepted configuration speaks a
// supported version and names a router; ADD and CHECK carry a pod address inside the subnet
// when one is given; a refusal has a code and a message, and its error JSON parses.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "../tools/wharf-cni/netconf.h"
#include "fuzz_check.h"

using namespace wharf::cni;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto args = parse_cni_args(text);
  if (args) {
    for (const auto& [k, v] : *args) WHARF_FUZZ_CHECK(!k.empty(), "empty key accepted");
  }
  for (Command c : {Command::kAdd, Command::kDel, Command::kCheck}) {
    Invocation inv;
    inv.command = c;
    inv.sandbox = "fuzz";
    inv.netns = "/n";
    inv.ifname = "eth0";
    inv.args = {{"K8S_POD_NAMESPACE", "ns"}};
    if (args) inv.args.insert(args->begin(), args->end());  // the pod's names, as CNI_ARGS
    Error err;
    const auto nc = read_netconf(text, inv, "/r", &err);
    if (!nc) {
      WHARF_FUZZ_CHECK(!err.msg.empty() && static_cast<int>(err.code) > 0, "refused silently");
      const auto j = nlohmann::json::parse(error_json("", err), nullptr, false);
      WHARF_FUZZ_CHECK(j.is_object() && j["code"].is_number(), "error JSON");
      continue;
    }
    WHARF_FUZZ_CHECK(!nc->router.empty(), "no router");
    const std::string name = pod_name(inv);
    WHARF_FUZZ_CHECK(!name.empty() && name.size() <= 63, "pod name out of bounds");
    if (c == Command::kDel) continue;
    WHARF_FUZZ_CHECK(nc->pod_ip != 0, "no address");
    WHARF_FUZZ_CHECK(nlohmann::json::parse(nc->prev_result, nullptr, false).is_object(),
                     "prevResult not passed on as an object");
    if (nc->subnet) {
      const uint32_t mask = nc->subnet->second == 0 ? 0 : ~uint32_t{0} << (32 - nc->subnet->second);
      WHARF_FUZZ_CHECK((nc->pod_ip & mask) == nc->subnet->first, "address outside the subnet");
    }
  }
  WHARF_FUZZ_CHECK(!read_version_request(text).empty(), "VERSION unanswered");
  return 0;
}
