// Property checks inside fuzz targets: a failed check prints where and why, then aborts, which
// libFuzzer records as a crash (with the input) and the replay driver reports as a failure.
#pragma once

#include <cstdio>
#include <cstdlib>

#define WHARF_FUZZ_CHECK(cond, what)                                                         \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   what);                                                                    \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
