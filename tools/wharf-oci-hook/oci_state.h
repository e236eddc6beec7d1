// wharf-oci-hook's input: the container's state, which the runtime writes on the hook's stdin
// (OCI runtime spec 1.0, "State"), and the root path of the bundle's config.json. Both are
// read as untrusted text: a malformed document is refused with the reason, never guessed at.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace wharf::oci_hook {

// The annotation that asks for the device view (wharf-device-plugin's Allocate sets it; a
// podman user passes --annotation). Its value must be "true".
inline constexpr std::string_view kViewAnnotation = "io.wharf.device-view";

struct ContainerState {
  std::string id;
  std::string bundle;  // absolute path of the bundle directory
  std::map<std::string, std::string> annotations;
};

// Decodes the state document. Missing or mistyped "id" or "bundle", a relative bundle, or
// annotations that are not all strings: nullopt, and *why says which.
std::optional<ContainerState> parse_state(std::string_view json, std::string* why);

// Whether the state asks for the view (kViewAnnotation is "true").
bool wants_view(const ContainerState& state);

// The container's root file system from the bundle's config.json: "root"."path", absolute or
// relative to `bundle`. A path with a ".." component is refused (a relative one could climb
// out of the bundle); an absolute one is the runtime's choice (podman keeps roots elsewhere).
std::optional<std::string> root_path(std::string_view config_json, const std::string& bundle,
                                     std::string* why);

}  // namespace wharf::oci_hook
