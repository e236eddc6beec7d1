// A client's control connection to the router (docs/wire-protocol.md): one SOCK_SEQPACKET socket,
// synchronous request/reply. Thread-safe (one call at a time per connection).
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <mutex>

#include "common/unique_fd.h"
#include "proto/codec.h"
#include "proto/messages.h"

namespace wharf::proto {

// Path of the router socket: $WHARF_ROUTER, else /run/wharf/wharfd.sock.
const char* router_socket_path();

class RouterClient {
 public:
  // Connects to the router socket. Returns 0 or an errno.
  int connect(const char* path);
  void close() { sock_.reset(); }
  // In a forked child (one thread, every lock as fork left it): closes the connection and
  // drops the resumer, taking no lock; the parent's session is not the child's to resume.
  void abandon_in_child() {
    sock_.reset();
    resumer_ = nullptr;
  }
  // False once the connection broke: the router closed it, a reply did not match its request
  // or did not come in time. The client then closes it; every later call fails with ENODEV.
  bool connected() const { return sock_.valid(); }
  int fd() const { return sock_.get(); }
  // How long call() waits for a reply (ETIMEDOUT after); -1, the default, waits forever.
  void set_reply_timeout_ms(int ms) { timeout_ms_ = ms; }

  // A session that can outlive its router process (a library's): when the connection
  // breaks, `resumer` is called with the client's lock held to connect `fresh` to the
  // router again and restore the session there (0 or an errno); the client then goes on
  // over fresh's connection, and the call that found it broken is sent again. Without one,
  // or when it fails, the client stays closed (ENODEV).
  using Resumer = std::function<int(RouterClient* fresh)>;
  void set_resumer(Resumer resumer) {
    std::lock_guard<std::mutex> guard(mu_);
    resumer_ = std::move(resumer);
  }
  // Resumes now if the router hung up (what a thread watching the connection calls when it
  // sees the hang-up). Returns 0 when connected, else the resumer's errno (ENODEV without).
  int recover();
  // A duplicate of the connection's descriptor for such a watcher to poll (invalid when
  // closed); it names the connection as it is now.
  UniqueFd watch_fd();

  // Sends `req` as a one-way request (kNoReplyBit): the router serves it in order with the
  // others but answers nothing. Returns 0 or an errno for a broken connection.
  template <class Req>
  int post(Op op, const Req& req) {
    uint8_t body[kMaxMessage] = {};
    size_t blen = 0;
    if (!encode_body(req, body, &blen)) return EMSGSIZE;
    return post_bytes(static_cast<uint16_t>(static_cast<uint16_t>(op) | kNoReplyBit), body, blen);
  }

  // Sends `req` with `nfds` descriptors and waits for the reply. Returns the router's status
  // (0 or an errno), or an errno for a broken connection (then !connected()). Descriptors in
  // the reply are stored in out_fds (up to max_out).
  template <class Req, class Rep>
  int call(Op op, const Req& req, const int* fds, int nfds, Rep* rep, UniqueFd* out_fds = nullptr,
           int max_out = 0) {
    uint8_t body[kMaxMessage] = {};
    size_t blen = 0;
    if (!encode_body(req, body, &blen)) return EMSGSIZE;
    uint8_t reply[kMaxMessage];
    size_t rlen = 0;
    int err = transact(op, body, blen, fds, nfds, reply, &rlen, out_fds, max_out);
    if (err != 0) return err;
    return decode(reply, rlen, rep) ? 0 : EPROTO;
  }

 private:
  int transact(Op op, const uint8_t* body, size_t blen, const int* fds, int nfds, uint8_t* reply,
               size_t* rlen, UniqueFd* out_fds, int max_out);
  int transact_locked(Op op, const uint8_t* body, size_t blen, const int* fds, int nfds,
                      uint8_t* reply, size_t* rlen, UniqueFd* out_fds, int max_out);
  // With mu_ held: runs the resumer on a broken connection. 0 when it took over.
  int resume_locked();
  // Sends one request datagram (op as it goes on the wire). Returns 0 or an errno; the
  // request's sequence number goes to *seq. Caller holds mu_ (post takes it itself).
  int send_locked(uint16_t op, const uint8_t* body, size_t blen, const int* fds, int nfds,
                  uint32_t* seq);
  int post_bytes(uint16_t op, const uint8_t* body, size_t blen);
  // Encodes `req` into `body` (kMaxMessage bytes); false when it does not fit.
  template <class Req>
  static bool encode_body(const Req& req, uint8_t* body, size_t* blen) {
    *blen = encode(req, body, kMaxMessage);
    return *blen != 0 || sizeof(Req) <= 1;
  }

  // A transport failure: the connection is unusable from here on.
  int broken(int err) {
    sock_.reset();
    return err;
  }

  std::mutex mu_;
  UniqueFd sock_;
  uint32_t seq_ = 0;
  int timeout_ms_ = -1;
  Resumer resumer_;
};

}  // namespace wharf::proto
