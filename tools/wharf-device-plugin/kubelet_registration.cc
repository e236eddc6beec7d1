#include "kubelet_registration.h"

#include <chrono>

#include "deviceplugin_v1beta1.grpc.pb.h"
#include "kubelet_api.h"

namespace wharf::device_plugin {
namespace {

// A kubelet that takes the connection but never answers must not hold up the retries.
constexpr std::chrono::seconds kRegisterTimeout{5};

}  // namespace

grpc::Status register_with_kubelet(const std::string& kubelet_socket, const std::string& endpoint,
                                   const std::string& resource) {
  const auto channel =
      grpc::CreateChannel("unix:" + kubelet_socket, grpc::InsecureChannelCredentials());
  const auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(std::string(kApiVersion));
  request.set_endpoint(endpoint);
  request.set_resource_name(resource);
  request.mutable_options()->set_pre_start_required(false);
  request.mutable_options()->set_get_preferred_allocation_available(false);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kRegisterTimeout);
  v1beta1::Empty reply;
  return stub->Register(&context, request, &reply);
}

}  // namespace wharf::device_plugin
