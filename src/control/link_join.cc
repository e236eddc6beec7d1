#include "control/link_join.h"

#include <httplib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "control/files.h"
#include "control/host_ca.h"

namespace wharf::control {

using json = nlohmann::json;

LinkFiles link_files(const std::string& dir) {
  return {dir + "/ca.pem", dir + "/host.pem", dir + "/host.key", dir + "/host.token"};
}

bool joined(const std::string& dir) {
  const LinkFiles f = link_files(dir);
  std::error_code ec;
  return std::filesystem::exists(f.ca, ec) && std::filesystem::exists(f.cert, ec) &&
         std::filesystem::exists(f.key, ec);
}

Status join_cluster(const ApiEndpoint& api, const std::string& join_token, const std::string& host,
                    const std::string& dir) {
  if (Status s = check_api_endpoint(api); !s.is_ok()) return s;
  if (!valid_host_name(host))
    return Status::error(Status::Code::kInvalidArgument, "not a host name: '" + host + "'");
  std::string key_pem, csr_pem;
  if (Status s = make_host_request(host, &key_pem, &csr_pem); !s.is_ok()) return s;
  auto client = make_api_client(api, join_token, 5, 30);
  const json body = {{"csr", csr_pem}};
  auto res = client->Post("/v1/hosts/" + host + "/certificate", body.dump(), "application/json");
  if (!res)
    return Status::error(Status::Code::kUnavailable, "cannot reach the orchestrator at " + api.url +
                                                         ": " + httplib::to_string(res.error()));
  const json answer = json::parse(res->body, nullptr, false);
  if (res->status == 401 || res->status == 403)
    return Status::error(Status::Code::kNotFound,
                         "the orchestrator refused the join token (" + std::to_string(res->status) +
                             ": it is unknown, used, expired or " + "for another host)");
  if (res->status != 200 || !answer.is_object() || !answer.contains("certificate") ||
      !answer["certificate"].is_string() || !answer.contains("ca") || !answer["ca"].is_string() ||
      !answer.contains("token") || !answer["token"].is_string()) {
    const std::string why =
        answer.is_object() && answer.contains("error") && answer["error"].is_string()
            ? answer["error"].get<std::string>()
            : res->body.substr(0, 200);
    return Status::error(Status::Code::kInternal,
                         "joining failed (" + std::to_string(res->status) + "): " + why);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::error(Status::Code::kInternal, "cannot make " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  const LinkFiles f = link_files(dir);
  // The certificate last: joined() takes the directory as complete once it exists.
  const bool written =
      write_file_replacing(f.key, key_pem, 0600) &&
      write_file_replacing(f.token, answer["token"].get<std::string>() + "\n", 0600) &&
      write_file_replacing(f.ca, answer["ca"].get<std::string>(), 0644) &&
      write_file_replacing(f.cert, answer["certificate"].get<std::string>(), 0644);
  if (!written)
    return Status::error(Status::Code::kInternal, "cannot write the link credentials to " + dir +
                                                      ": " + std::strerror(errno));
  return Status::ok();
}

}  // namespace wharf::control
