// One gRPC server of the DevicePlugin service on the plugin's socket in the kubelet's
// directory. It listens once start() returns; destroying it ends its ListAndWatch streams and
// stops it, and gRPC removes the socket's path. A kubelet that restarts deletes the socket:
// socket_gone() then says so, and the plugin destroys this server before it starts another on
// the same path. config and health must outlive it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "plugin_service.h"
#include "router_health.h"

namespace wharf::device_plugin {

class PluginServer {
 public:
  // Replaces a socket left at `socket_path` (absolute) and serves on it; null with *why on
  // failure.
  static std::unique_ptr<PluginServer> start(const std::string& socket_path,
                                             const PluginConfig& config, const RouterHealth* health,
                                             std::string* why);
  ~PluginServer();
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // True when the socket file is no longer the one this server made.
  bool socket_gone() const;

 private:
  PluginServer(std::string socket_path, const PluginConfig& config, const RouterHealth* health);

  const std::string socket_path_;
  ino_t socket_ino_ = 0;
  DevicePluginService service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace wharf::device_plugin
