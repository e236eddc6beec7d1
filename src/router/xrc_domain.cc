#include "router/xrc_domain.h"

#include <errno.h>
#include <fcntl.h>

namespace wharf::router {

XrcDomain* XrcDomains::open(const Container* c, bool has_file, uint64_t dev, uint64_t ino,
                            uint32_t oflags, int* err) {
  if (has_file) {
    auto it = named_.find(Key{c, dev, ino});
    if (it != named_.end()) {
      if ((oflags & O_CREAT) && (oflags & O_EXCL)) {
        *err = EEXIST;
        return nullptr;
      }
      it->second->opens++;
      return it->second;
    }
    if (!(oflags & O_CREAT)) {
      *err = ENOENT;
      return nullptr;
    }
  }
  auto d = std::make_unique<XrcDomain>();
  d->container = c;
  d->named = has_file;
  d->dev = dev;
  d->ino = ino;
  d->opens = 1;
  XrcDomain* raw = d.get();
  domains_.emplace(raw, std::move(d));
  if (has_file) named_.emplace(Key{c, dev, ino}, raw);
  return raw;
}

int XrcDomains::close(XrcDomain* d) {
  if (d->opens == 1 && d->users > 0) return EBUSY;
  drop_open(d);
  return 0;
}

void XrcDomains::drop_open(XrcDomain* d) {
  d->opens--;
  erase_if_unused(d);
}

void XrcDomains::release(XrcDomain* d) {
  d->users--;
  erase_if_unused(d);
}

void XrcDomains::erase_if_unused(XrcDomain* d) {
  if (d->opens > 0 || d->users > 0) return;
  if (d->named) named_.erase(Key{d->container, d->dev, d->ino});
  domains_.erase(d);
}

}  // namespace wharf::router
