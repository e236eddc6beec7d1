#include "plugin_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <vector>

#include "kubelet_api.h"

namespace wharf::device_plugin {
namespace {

// How often a ListAndWatch looks whether the kubelet hung up while the health stays.
constexpr std::chrono::milliseconds kCancelCheck{1000};

std::vector<std::string> strings(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return {field.begin(), field.end()};
}

std::string joined(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

void fill(const ContainerAllocation& a, v1beta1::ContainerAllocateResponse* out) {
  for (const auto& [name, value] : a.envs) (*out->mutable_envs())[name] = value;
  for (const auto& [name, value] : a.annotations) (*out->mutable_annotations())[name] = value;
  for (const Mount& m : a.mounts) {
    v1beta1::Mount* mount = out->add_mounts();
    mount->set_container_path(m.container_path);
    mount->set_host_path(m.host_path);
    mount->set_read_only(m.read_only);
  }
  for (const DeviceNode& d : a.devices) {
    v1beta1::DeviceSpec* spec = out->add_devices();
    spec->set_container_path(d.container_path);
    spec->set_host_path(d.host_path);
    spec->set_permissions(d.permissions);
  }
}

}  // namespace

DevicePluginService::DevicePluginService(const PluginConfig& config, const RouterHealth* health)
    : config_(config), health_(health), allocation_(container_allocation(config.host)) {}

void DevicePluginService::stop() {
  stopped_ = true;
  health_->wake_waiters();
}

v1beta1::ListAndWatchResponse DevicePluginService::device_list(bool healthy) const {
  v1beta1::ListAndWatchResponse list;
  for (const std::string& id : device_ids(config_.count)) {
    v1beta1::Device* d = list.add_devices();
    d->set_id(id);
    d->set_health(std::string(healthy ? kHealthy : kUnhealthy));
  }
  return list;
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext* /*context*/,
                                                         const v1beta1::Empty* /*request*/,
                                                         v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(false);
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(
    grpc::ServerContext* context, const v1beta1::Empty* /*request*/,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  RouterHealth::Reading sent = health_->now();
  spdlog::info("ListAndWatch: {} devices {}", config_.count, sent.healthy ? kHealthy : kUnhealthy);
  if (!writer->Write(device_list(sent.healthy))) return grpc::Status::OK;
  while (!stopped_ && !context->IsCancelled()) {
    const RouterHealth::Reading now =
        health_->wait_for_change(sent.changes, stopped_, kCancelCheck);
    if (now.changes == sent.changes || stopped_) continue;
    sent = now;
    if (!writer->Write(device_list(sent.healthy))) break;
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext* /*context*/,
                                           const v1beta1::AllocateRequest* request,
                                           v1beta1::AllocateResponse* response) {
  for (const v1beta1::ContainerAllocateRequest& container : request->container_requests()) {
    const std::vector<std::string> ids = strings(container.devices_ids());
    if (std::string why = check_device_ids(ids, config_.count); !why.empty()) {
      spdlog::warn("Allocate refused: {}", why);
      return {grpc::StatusCode::INVALID_ARGUMENT, why};
    }
    spdlog::info("Allocate: a container with {}", joined(ids));
    fill(allocation_, response->add_container_responses());
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(
    grpc::ServerContext* /*context*/, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  for (const v1beta1::ContainerPreferredAllocationRequest& container :
       request->container_requests()) {
    v1beta1::ContainerPreferredAllocationResponse* out = response->add_container_responses();
    for (std::string& id : preferred_allocation(strings(container.available_deviceids()),
                                                strings(container.must_include_deviceids()),
                                                container.allocation_size()))
      out->add_deviceids(std::move(id));
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(
    grpc::ServerContext* /*context*/, const v1beta1::PreStartContainerRequest* /*request*/,
    v1beta1::PreStartContainerResponse* /*response*/) {
  return grpc::Status::OK;
}

}  // namespace wharf::device_plugin
