// Definitions for the stub provider libraries (libmlx5.so.1, libefa.so.1) of the drop-in set.
//
// An application such as perftest NEEDs libmlx5.so.1 and libefa.so.1 next to libibverbs.so.1, and
// asks them about a device before using vendor extensions. When build/lib is on LD_LIBRARY_PATH
// these stubs load instead of Debian's, and answer the way the real libraries answer for a device
// that is not theirs (rdma-core providers/mlx5: mlx5_get_dv_ops() == NULL; providers/efa:
// !is_efa_dev()), so the application falls back to plain verbs:
//   WHARF_STUB_PTR    NULL with errno = EOPNOTSUPP
//   WHARF_STUB_INT    EOPNOTSUPP (a positive errno, errno untouched)
//   WHARF_STUB_NEG    -1 with errno = EOPNOTSUPP, for returns that are counts or descriptors
//   WHARF_STUB_FALSE  false (capability predicates)
//   WHARF_STUB_VOID   nothing
//
// Each entry is (return type, name, parameter types...) exactly as the installed vendor header
// declares it; the header is included, so a prototype that drifts from it fails to compile
// ("conflicting declaration of C function"). The stubs depend on nothing but libc: they must not
// pull in any libibverbs, ours or Debian's.
#pragma once

#include <errno.h>

#define WHARF_STUB_API extern "C" __attribute__((visibility("default")))

#define WHARF_STUB_PTR(ret, name, ...)   \
  WHARF_STUB_API ret name(__VA_ARGS__) { \
    errno = EOPNOTSUPP;                  \
    return nullptr;                      \
  }

#define WHARF_STUB_INT(name, ...) \
  WHARF_STUB_API int name(__VA_ARGS__) { return EOPNOTSUPP; }

#define WHARF_STUB_NEG(ret, name, ...)   \
  WHARF_STUB_API ret name(__VA_ARGS__) { \
    errno = EOPNOTSUPP;                  \
    return -1;                           \
  }

#define WHARF_STUB_FALSE(name, ...) \
  WHARF_STUB_API bool name(__VA_ARGS__) { return false; }

#define WHARF_STUB_VOID(name, ...) \
  WHARF_STUB_API void name(__VA_ARGS__) {}

// Binds a C-linkage function to an explicit symbol version ("name@V" compat, "name@@V" default).
#define WHARF_STUB_SYMVER(impl, versioned_name) __asm__(".symver " #impl ", " versioned_name)
