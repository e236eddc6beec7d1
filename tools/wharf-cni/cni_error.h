// What a CNI plugin reports when it fails (CNI spec 1.0, "Error"): a code, a message and
// details, printed as JSON on stdout with a non-zero exit (libcni reads the error from
// stdout). Codes 0-99 are the spec's; 100 and up are wharf-cni's own.
#pragma once

#include <string>

namespace wharf::cni {

enum class ErrorCode : int {
  kIncompatibleVersion = 1,
  kUnsupportedField = 2,
  kUnknownContainer = 3,
  kInvalidEnvironment = 4,
  kIoFailure = 5,
  kDecodeFailure = 6,
  kInvalidConfig = 7,
  kTryAgainLater = 11,
  // wharf-cni's: the router cannot be reached (its socket is missing or refuses).
  kRouterUnreachable = 100,
  // The router (or the orchestrator) refused the registration; details carry its reason.
  kRegistrationRefused = 101,
  // CHECK: the router holds no registration for the sandbox, or another than ADD made.
  kNotRegistered = 102,
  kRegistrationDiffers = 103,
  // The orchestrator named in the configuration cannot be reached.
  kOrchestratorUnreachable = 104,
};

struct Error {
  ErrorCode code = ErrorCode::kInvalidConfig;
  std::string msg;
  std::string details;
};

// The error as the spec's JSON object, with the config's cniVersion (or the newest we speak
// when the config could not be read).
std::string error_json(const std::string& cni_version, const Error& e);

}  // namespace wharf::cni
