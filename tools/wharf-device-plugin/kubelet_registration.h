// The plugin's registration with the kubelet: Register on the kubelet's socket, naming the
// plugin's socket (a file name in the kubelet's directory), its resource and its options.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

namespace wharf::device_plugin {

// One attempt, bounded in time: OK, or why the kubelet is absent or refused.
grpc::Status register_with_kubelet(const std::string& kubelet_socket, const std::string& endpoint,
                                   const std::string& resource);

}  // namespace wharf::device_plugin
