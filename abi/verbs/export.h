// Export markers for libibverbs.so.1.
//
// The library is built with -fvisibility=hidden and a version script (libibverbs.map). A symbol is
// exported only if it is BOTH marked WHARF_EXPORT here AND listed in the map; the map decides its
// version node. Marking without listing leaves the symbol local; listing without defining is
// silently dropped by GNU ld, which the ABI test (tests/abi/check_exports.py) catches.
//
// Exceptions: every exported entry must be noexcept in effect. Do not spell `noexcept` on a
// definition whose prototype comes from <infiniband/verbs.h>: the header declares it without one,
// and clang (and clang-tidy) reject the mismatch even though GCC accepts it. Such bodies must catch
// anything that can throw and convert it to rdma-core's error convention in one place. Entries we
// declare ourselves (the IBVERBS_PRIVATE_34 set, whose driver.h is not installed) may say noexcept.
#pragma once

// Default visibility. Alone it serves exported data, which must sit in an extern "C" { } block:
// `WHARF_EXPORT int x = 0;` would be a definition "declared extern", which GCC warns about.
#define WHARF_VISIBLE __attribute__((visibility("default")))

// A function with C linkage and default visibility.
#define WHARF_EXPORT extern "C" WHARF_VISIBLE

// Binds `impl` (an exported, C-linkage function) to an explicit symbol version. With one '@' it
// is a compat (non-default) version, e.g.
//   WHARF_SYMVER(wharf_ibv_register_driver_1_1, "ibv_register_driver@IBVERBS_1.1");
// programs linked against that old version keep resolving, new links cannot pick it up. The name
// must be listed in that node of the map (`local: *;` would hide it otherwise); `impl` itself
// stays local. If the same name also has a default version, bind that one explicitly as well
// ("name@@IBVERBS_1.1") and list the name in both nodes: a plain definition would be claimed by
// the first node that lists the name. The asm directive (rather than __attribute__((symver)))
// works with both GCC and clang.
#define WHARF_SYMVER(impl, versioned_name) __asm__(".symver " #impl ", " versioned_name)
