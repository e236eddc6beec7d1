#include "router/process_caps.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace wharf::router {

bool parse_effective_caps(const char* status, unsigned long long* caps) {
  const char* line = strstr(status, "\nCapEff:");
  if (line == nullptr) return false;
  const char* p = line + strlen("\nCapEff:");
  while (*p == ' ' || *p == '\t') ++p;
  char* end = nullptr;
  errno = 0;
  *caps = strtoull(p, &end, 16);
  return errno == 0 && end != p && (*end == '\n' || *end == '\0');
}

bool process_has_capability(pid_t pid, int cap) {
  if (pid <= 0 || cap < 0 || cap > 63) return false;
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) return false;
  char buf[4096];
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  unsigned long long caps = 0;
  return parse_effective_caps(buf, &caps) && ((caps >> cap) & 1) != 0;
}

}  // namespace wharf::router
