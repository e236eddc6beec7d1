#include "control/kv_store.h"

#include "control/etcd_store.h"
#include "control/sqlite_store.h"

namespace wharf::control {

std::string prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty())
    prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

Status open_kv_store(const std::string& url, std::unique_ptr<KvStore>* out) {
  const std::string sqlite = "sqlite:";
  const std::string etcd = "etcd:";
  if (url.rfind(sqlite, 0) == 0 && url.size() > sqlite.size())
    return open_sqlite_store(url.substr(sqlite.size()), out);
  if (url.rfind(etcd, 0) == 0 && url.size() > etcd.size())
    return open_etcd_store(url.substr(etcd.size()), out);
  return Status::error(Status::Code::kInvalidArgument,
                       "store '" + url + "': expected sqlite:PATH or etcd:http://HOST:PORT");
}

}  // namespace wharf::control
