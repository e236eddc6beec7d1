// How every client of the orchestrator's API (control/api.h) reaches it: wharfctl, wharf-run
// and the router's HostAgent and ContainerWatch. One place decides the transport: http:// is
// plain HTTP; https:// is TLS, with the server's certificate verified against a CA file (or
// the system's store) and its host name or address checked against the URL's.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace httplib {
class Client;
}

namespace wharf::control {

// The orchestrator as its clients are told of it (--orchestrator / -o, --tls-ca).
struct ApiEndpoint {
  std::string url;      // "http://HOST:PORT" or "https://HOST:PORT"
  std::string ca_file;  // https: the PEM CA certificate(s) to trust; "": the system's store
};

// The help of the clients' --tls-ca option.
inline constexpr const char* kTlsCaHelp =
    "With an https:// orchestrator URL: the CA certificate (PEM) its certificate must chain to "
    "(default: the system's trusted CAs)";

// Whether the endpoint can be used: an http:// or https:// URL, and a CA file only with
// https:// (a CA given for a plain-HTTP URL would protect nothing). kInvalidArgument, with a
// message naming the flags, otherwise.
[[nodiscard]] Status check_api_endpoint(const ApiEndpoint& api);

// A client for `api` (check_api_endpoint must have passed) presenting `token` ("": none),
// giving up on connecting after connect_timeout_s and on an answer after read_timeout_s.
// Requests and answers go over TCP_NODELAY (httplib writes headers and body separately).
std::unique_ptr<httplib::Client> make_api_client(const ApiEndpoint& api, const std::string& token,
                                                 int connect_timeout_s, int read_timeout_s);

}  // namespace wharf::control
