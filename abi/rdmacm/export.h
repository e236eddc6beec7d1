// Export markers for librdmacm.so.1 (the same scheme as abi/verbs/export.h).
//
// The library is built with -fvisibility=hidden and a version script (librdmacm.map). A symbol is
// exported only if it is BOTH marked WHARF_EXPORT here AND listed in the map; the map decides its
// version node. tests/abi/check_exports.py compares the result with Debian's librdmacm.so.1.
//
// Every exported entry must be noexcept in effect; as in abi/verbs, definitions whose prototype
// comes from <rdma/rdma_cma.h> do not spell `noexcept` (the header declares them without one), so
// their bodies catch what can throw and convert it to rdma-core's convention: -1 with errno for
// int-returning calls, NULL with errno for pointer-returning ones.
#pragma once

#define WHARF_VISIBLE __attribute__((visibility("default")))
#define WHARF_EXPORT extern "C" WHARF_VISIBLE
