// The kubelet's device-plugin conventions (API v1beta1) beyond the messages of
// deviceplugin_v1beta1.proto: where its socket is, the version a plugin registers with, and the
// health strings of ListAndWatch.
#pragma once

#include <string_view>

namespace wharf::device_plugin {

constexpr std::string_view kApiVersion = "v1beta1";
// Holds the kubelet's socket and the plugins'. A kubelet that starts deletes every socket in
// it; its plugins then serve again and register again.
constexpr std::string_view kDefaultKubeletDir = "/var/lib/kubelet/device-plugins";
constexpr std::string_view kKubeletSocket = "kubelet.sock";
constexpr std::string_view kHealthy = "Healthy";
constexpr std::string_view kUnhealthy = "Unhealthy";

}  // namespace wharf::device_plugin
