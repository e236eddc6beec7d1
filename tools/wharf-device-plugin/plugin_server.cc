#include "plugin_server.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <utility>

namespace wharf::device_plugin {
namespace {

// How long stopping waits for calls under way before cancelling them.
constexpr std::chrono::seconds kShutdownGrace{2};

// The inode of the socket at `path`, or 0 when there is none.
ino_t socket_inode(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

}  // namespace

PluginServer::PluginServer(std::string socket_path, const PluginConfig& config,
                           const RouterHealth* health)
    : socket_path_(std::move(socket_path)), service_(config, health) {}

std::unique_ptr<PluginServer> PluginServer::start(const std::string& socket_path,
                                                  const PluginConfig& config,
                                                  const RouterHealth* health, std::string* why) {
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *why = socket_path + " exists and is not a socket";
      return nullptr;
    }
    if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
      *why = "cannot remove the stale socket " + socket_path + ": " + std::strerror(errno);
      return nullptr;
    }
  }
  std::unique_ptr<PluginServer> s(new PluginServer(socket_path, config, health));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&s->service_);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) {
    *why = "cannot serve on " + socket_path + " (gRPC's log above says why)";
    return nullptr;
  }
  s->socket_ino_ = socket_inode(socket_path);
  if (s->socket_ino_ == 0) {  // else socket_gone() would say so every second
    *why = "serving on " + socket_path + ", which is not there: " + std::strerror(errno);
    return nullptr;
  }
  return s;
}

PluginServer::~PluginServer() {
  service_.stop();
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
}

bool PluginServer::socket_gone() const {
  return socket_ino_ == 0 || socket_inode(socket_path_) != socket_ino_;
}

}  // namespace wharf::device_plugin
