#include "cni_error.h"

#include <nlohmann/json.hpp>

namespace wharf::cni {

std::string error_json(const std::string& cni_version, const Error& e) {
  nlohmann::json j = {{"cniVersion", cni_version.empty() ? "1.0.0" : cni_version},
                      {"code", static_cast<int>(e.code)},
                      {"msg", e.msg}};
  if (!e.details.empty()) j["details"] = e.details;
  // Replacement, not an exception, for bytes that are not UTF-8 (they may come from stdin).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace wharf::cni
