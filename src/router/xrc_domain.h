// The router's XRC domains. A domain named by a file (ibv_open_xrcd with a file descriptor) is
// found again by the file's identity, but only from the container that made it: opening the
// same file from another container makes a domain of its own, so no container can reach
// another's target QPs or XRC SRQs by guessing a file. A domain without a file belongs to the
// one session that opened it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "router/objects.h"

namespace wharf::router {

class XrcDomains {
 public:
  // Opens the domain container c names by file dev/ino (has_file false: a new private
  // domain), as ibv_open_xrcd's oflags say: O_CREAT makes it if missing, O_EXCL with O_CREAT
  // fails if present. Returns the domain (its `opens` counted) or nullptr with *err ENOENT or
  // EEXIST.
  XrcDomain* open(const Container* c, bool has_file, uint64_t dev, uint64_t ino, uint32_t oflags,
                  int* err);
  // A session's handle to d closes; d goes once no handle and no object holds it. EBUSY (and
  // nothing changes) if it is the last handle while target QPs or XRC SRQs remain in d.
  int close(XrcDomain* d);
  // A handle to d goes with its session (whose own objects went first): no EBUSY.
  void drop_open(XrcDomain* d);
  // An object of d (target QP, XRC SRQ) went away.
  void release(XrcDomain* d);
  size_t size() const { return domains_.size(); }

 private:
  using Key = std::tuple<const Container*, uint64_t, uint64_t>;
  void erase_if_unused(XrcDomain* d);

  std::map<Key, XrcDomain*> named_;                           // the domains named by a file
  std::map<XrcDomain*, std::unique_ptr<XrcDomain>> domains_;  // every domain, named or not
};

}  // namespace wharf::router
