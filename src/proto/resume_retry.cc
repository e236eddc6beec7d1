#include "proto/resume_retry.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "common/clock.h"

namespace wharf::proto {
namespace {

constexpr int kReplyTimeoutMs = 5000;

uint64_t resume_window_ns() {
  const char* v = getenv("WHARF_RESUME_S");
  const long s = v != nullptr && *v != '\0' ? strtol(v, nullptr, 10) : 30;
  return static_cast<uint64_t>(std::max(0L, s)) * 1'000'000'000ull;
}

void nap(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace

int resume_with_retries(RouterClient* fresh, const char* path, const std::function<int()>& greet,
                        const std::function<int()>& restore,
                        const std::function<bool()>& cancelled) {
  const uint64_t deadline = now_ns() + resume_window_ns();
  uint64_t backoff = 5'000'000;  // 5 ms, doubling to 50 ms: a refused connect costs little
  for (;;) {
    int err = fresh->connect(path);
    fresh->set_reply_timeout_ms(kReplyTimeoutMs);
    if (err == 0) err = greet();
    if (err == 0) {
      err = restore();
      fresh->set_reply_timeout_ms(-1);
      return err;
    }
    fresh->close();
    if (err == EOPNOTSUPP || err == EPROTO || now_ns() + backoff > deadline) return err;
    if (cancelled()) return ECANCELED;
    nap(backoff);
    backoff = std::min<uint64_t>(backoff * 2, 50'000'000);
  }
}

}  // namespace wharf::proto
