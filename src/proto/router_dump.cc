#include "proto/router_dump.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proto/messages.h"
#include "proto/router_client.h"

namespace wharf::proto {

bool dump_router_resources(const std::string& socket_path, std::string* json, std::string* error) {
  auto fail = [&](const std::string& why) {
    *error = "router " + socket_path + ": " + why;
    return false;
  };
  RouterClient client;
  if (int err = client.connect(socket_path.c_str()); err != 0)
    return fail(std::string(std::strerror(err)) + " (is wharfd running? see -r)");
  client.set_reply_timeout_ms(10000);
  DumpResourcesRep body;
  UniqueFd fds[1];
  if (int err = client.call(Op::kDumpResources, Empty{}, nullptr, 0, &body, fds, 1); err != 0)
    return fail(err == ETIMEDOUT ? "no answer" : std::strerror(err));
  if (!fds[0].valid() || body.bytes > (64u << 20)) return fail("malformed answer");
  json->resize(body.bytes);
  for (size_t done = 0; done < json->size();) {
    const ssize_t r =
        ::pread(fds[0].get(), json->data() + done, json->size() - done, static_cast<off_t>(done));
    if (r <= 0) return fail("short answer");
    done += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace wharf::proto
