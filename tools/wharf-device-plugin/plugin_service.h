// The DevicePlugin service of one gRPC server (plugin_server.h): answers the kubelet from
// allocation.h's rules and the router's health. Its methods run on gRPC's threads, several at
// once; config and health must outlive it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>

#include "allocation.h"
#include "deviceplugin_v1beta1.grpc.pb.h"
#include "router_health.h"

namespace wharf::device_plugin {

struct PluginConfig {
  std::string resource;  // the extended resource, e.g. rdma/wharf
  int count = 0;         // devices wharf-0 ... wharf-<count - 1>
  HostLayout host;
};

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(const PluginConfig& config, const RouterHealth* health);

  // Ends every ListAndWatch stream and makes later ones end at once: before the server stops.
  void stop();

  // pre_start_required and get_preferred_allocation_available are both false.
  grpc::Status GetDevicePluginOptions(grpc::ServerContext* context, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  // Every device with the router's health; again on each change until the kubelet goes or
  // stop().
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  // INVALID_ARGUMENT when a container asks for a device not of ours.
  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* context,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext* context,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

 private:
  v1beta1::ListAndWatchResponse device_list(bool healthy) const;

  const PluginConfig& config_;
  const RouterHealth* health_;
  const ContainerAllocation allocation_;  // every container's
  std::atomic<bool> stopped_{false};
};

}  // namespace wharf::device_plugin
