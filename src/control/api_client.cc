#include "control/api_client.h"

#include <httplib.h>

namespace wharf::control {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Status check_api_endpoint(const ApiEndpoint& api) {
  const bool https = starts_with(api.url, "https://");
  if (!https && !starts_with(api.url, "http://"))
    return Status::error(
        Status::Code::kInvalidArgument,
        "orchestrator URL '" + api.url + "': expected http://HOST:PORT or https://HOST:PORT");
  if (!https && !api.ca_file.empty())
    return Status::error(Status::Code::kInvalidArgument,
                         "--tls-ca (WHARF_TLS_CA) " + api.ca_file +
                             " goes with an https:// orchestrator URL, not " + api.url);
  return Status::ok();
}

std::unique_ptr<httplib::Client> make_api_client(const ApiEndpoint& api, const std::string& token,
                                                 int connect_timeout_s, int read_timeout_s) {
  auto c = std::make_unique<httplib::Client>(api.url);
  if (starts_with(api.url, "https://")) {
    // Certificate chain and name (DNS or IP subject alternative name) both checked.
    c->enable_server_certificate_verification(true);
    if (!api.ca_file.empty()) c->set_ca_cert_path(api.ca_file);
  }
  if (!token.empty()) c->set_bearer_token_auth(token.c_str());
  c->set_connection_timeout(connect_timeout_s);
  c->set_read_timeout(read_timeout_s);
  c->set_tcp_nodelay(true);
  return c;
}

}  // namespace wharf::control
