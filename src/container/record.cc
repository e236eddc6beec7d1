#include "container/record.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace wharf::container {
namespace {

// Sets NAME=value + (old value ? sep + old : "") in env.
void prepend_var(std::vector<std::string>* env, const std::string& name, const std::string& value,
                 char sep) {
  const std::string key = name + "=";
  for (auto& e : *env) {
    if (e.compare(0, key.size(), key) == 0) {
      std::string old = e.substr(key.size());
      e = key + value + (old.empty() ? "" : std::string(1, sep) + old);
      return;
    }
  }
  env->push_back(key + value);
}

void set_var(std::vector<std::string>* env, const std::string& name, const std::string& value) {
  const std::string key = name + "=";
  for (auto& e : *env) {
    if (e.compare(0, key.size(), key) == 0) {
      e = key + value;
      return;
    }
  }
  env->push_back(key + value);
}

}  // namespace

std::string record_path(const std::string& name) { return std::string(kRecordDir) + "/" + name; }

int write_record(const std::string& name, const Record& r) {
  ::mkdir("/run/wharf", 0755);
  if (::mkdir(kRecordDir, 0755) != 0 && errno != EEXIST) return errno;
  const std::string path = record_path(name);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "pid=" << r.pid << "\nrouter=" << r.router << "\nlib_dir=" << r.lib_dir
        << "\ndropin=" << (r.dropin ? 1 : 0) << "\n";
    if (!out.flush()) return EIO;
  }
  return ::rename(tmp.c_str(), path.c_str()) == 0 ? 0 : errno;
}

int read_record(const std::string& name, Record* r) {
  std::ifstream in(record_path(name));
  if (!in) return ENOENT;
  std::stringstream text;
  text << in.rdbuf();
  return parse_record(text.str(), r);
}

int parse_record(const std::string& text, Record* r) {
  Record got;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return EINVAL;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "pid") {
      char* end = nullptr;
      errno = 0;
      long pid = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || pid <= 0 || pid > INT32_MAX || errno != 0)
        return EINVAL;
      got.pid = static_cast<pid_t>(pid);
    } else if (key == "router") {
      got.router = value;
    } else if (key == "lib_dir") {
      got.lib_dir = value;
    } else if (key == "dropin") {
      got.dropin = value == "1";
    }
  }
  if (got.pid == 0 || got.router.empty() || got.lib_dir.empty()) return EINVAL;
  *r = got;
  return 0;
}

void remove_record(const std::string& name) { ::unlink(record_path(name).c_str()); }

std::vector<std::string> container_environment(const std::vector<std::string>& base,
                                               const std::string& name, const Record& r) {
  std::vector<std::string> env = base;
  set_var(&env, "WHARF_ROUTER", r.router);
  set_var(&env, "WHARF_CONTAINER", name);
  if (r.dropin) {
    prepend_var(&env, "LD_LIBRARY_PATH", r.lib_dir, ':');
    return env;
  }
  // Prepended in reverse: LD_PRELOAD lists libibverbs first, then librdmacm, which needs it.
  // A tree built without librdmacm gets none (the loader would complain on every exec).
  const std::string rdmacm = r.lib_dir + "/librdmacm.so.1";
  if (::access(rdmacm.c_str(), R_OK) == 0) prepend_var(&env, "LD_PRELOAD", rdmacm, ':');
  prepend_var(&env, "LD_PRELOAD", r.lib_dir + "/libibverbs.so.1", ':');
  return env;
}

}  // namespace wharf::container
