// The verbs devices wharf-scala opens: a Wharf router's wharf0, by the router's socket (the
// process must run with Wharf's libibverbs: main.cc runs itself again with it preloaded), or
// an RNIC by its name.
#pragma once

#include <memory>
#include <string>

#include "half.h"

namespace wharf::scala {

struct OpenDevice {
  Half::Device dev;
  OpenDevice() = default;
  OpenDevice(const OpenDevice&) = delete;
  OpenDevice& operator=(const OpenDevice&) = delete;
  ~OpenDevice();
};

// Whether `endpoint` names a Wharf router (a socket on disk) rather than a device.
bool is_router_socket(const std::string& endpoint);

// Opens the router's wharf0 (through WHARF_ROUTER) or the device named, and queries it and its
// port 1. nullptr and *error on failure.
std::unique_ptr<OpenDevice> open_device(const std::string& endpoint, std::string* error);

}  // namespace wharf::scala
