// rdma_create_event_channel / rdma_destroy_event_channel: one end of a SOCK_SEQPACKET pair is
// channel->fd, the router writes events to the other, so poll() on the fd is readable exactly
// when an event waits.
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <new>
#include <unordered_set>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"

namespace wharf::rdmacm {
namespace {

struct LiveChannels {
  std::mutex mu;
  std::unordered_set<const Channel*> set;
};

// Never destroyed: threads may still be blocked on a channel during exit.
LiveChannels& live() {
  static auto* l = new LiveChannels();
  return *l;
}

}  // namespace

bool channel_live(const Channel* ch) {
  LiveChannels& l = live();
  std::lock_guard<std::mutex> g(l.mu);
  return l.set.count(ch) != 0;
}

Channel* channel_create() {
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return nullptr;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) return nullptr;
  auto* ch = new (std::nothrow) Channel();
  if (ch == nullptr) {
    ::close(fds[0]);
    ::close(fds[1]);
    errno = ENOMEM;
    return nullptr;
  }
  proto::Handle rep;
  int err = link->call(proto::Op::kCmCreateChannel, proto::Empty{}, &rep, &fds[1], 1);
  if (err != 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    delete ch;
    errno = err;
    return nullptr;
  }
  ch->channel.fd = fds[0];
  ch->router_end = fds[1];
  ch->handle = rep.handle;
  try {
    LiveChannels& l = live();
    std::lock_guard<std::mutex> g(l.mu);
    l.set.insert(ch);
  } catch (...) {
    proto::Empty none;
    (void)link->call(proto::Op::kCmDestroyChannel, proto::Handle{ch->handle}, &none);
    ::close(ch->channel.fd);
    ::close(ch->router_end);
    delete ch;
    errno = ENOMEM;
    return nullptr;
  }
  return ch;
}

void channel_destroy(Channel* ch) {
  if (ch == nullptr) return;
  {
    LiveChannels& l = live();
    std::lock_guard<std::mutex> g(l.mu);
    l.set.erase(ch);
  }
  if (RouterLink* link = RouterLink::get()) {
    proto::Empty rep;
    // EBUSY (an id still reports here) is the application's error; the socket goes regardless.
    (void)link->call(proto::Op::kCmDestroyChannel, proto::Handle{ch->handle}, &rep);
  }
  ::close(ch->channel.fd);
  ::close(ch->router_end);
  delete ch;
}

int restore_channels(proto::RouterClient* fresh) {
  LiveChannels& l = live();
  std::lock_guard<std::mutex> g(l.mu);
  for (const Channel* ch : l.set) {
    proto::Empty none;
    if (int err = fresh->call(proto::Op::kCmRestoreChannel, proto::Handle{ch->handle},
                              &ch->router_end, 1, &none);
        err != 0)
      return err;
  }
  return 0;
}

void release_channels() {
  LiveChannels& l = live();
  std::lock_guard<std::mutex> g(l.mu);
  for (const Channel* ch : l.set) {
    Channel* c = const_cast<Channel*>(ch);
    ::close(c->router_end);
    c->router_end = -1;
  }
}

}  // namespace wharf::rdmacm

using namespace wharf::rdmacm;

WHARF_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  try {
    Channel* ch = channel_create();
    return ch != nullptr ? &ch->channel : nullptr;
  } catch (...) {
    errno = ENOMEM;
    return nullptr;
  }
}

WHARF_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  try {
    channel_destroy(to_channel(channel));
  } catch (...) {
  }
}
