#include "device.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace wharf::scala {

OpenDevice::~OpenDevice() {
  if (dev.ctx != nullptr) ibv_close_device(dev.ctx);
}

bool is_router_socket(const std::string& endpoint) {
  struct stat st {};
  return stat(endpoint.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::unique_ptr<OpenDevice> open_device(const std::string& endpoint, std::string* error) {
  const bool router = is_router_socket(endpoint);
  if (router) setenv("WHARF_ROUTER", endpoint.c_str(), 1);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    *error = router ? "no device at router " + endpoint +
                          " (wharf-scala runs with Wharf's libibverbs: see docs/OPERATIONS.md)"
                    : "no RDMA devices";
    return nullptr;
  }
  ibv_device* chosen = router ? list[0] : nullptr;
  for (int i = 0; !router && i < n; ++i)
    if (endpoint == ibv_get_device_name(list[i])) chosen = list[i];
  auto d = std::make_unique<OpenDevice>();
  if (chosen != nullptr) {
    d->dev.name = ibv_get_device_name(chosen);
    if (router) d->dev.name += " (router " + endpoint + ")";
    d->dev.ctx = ibv_open_device(chosen);
  }
  ibv_free_device_list(list);
  if (chosen == nullptr) {
    *error = "no device " + endpoint;
    return nullptr;
  }
  Half::Device& v = d->dev;
  if (v.ctx == nullptr || ibv_query_device(v.ctx, &v.attr) != 0 ||
      ibv_query_port(v.ctx, 1, &v.port) != 0 || ibv_query_gid(v.ctx, 1, 0, &v.gid) != 0) {
    *error = "opening " + endpoint + ": " + strerror(errno);
    return nullptr;
  }
  return d;
}

}  // namespace wharf::scala
