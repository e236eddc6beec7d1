// rsockets over our verbs and rdma_cm: the rsocket API of rdma-core's librdmacm (rsocket.h),
// for programs that call it (rstream, riostream, udpong, rcopy) and for rdma-core's
// librspreload, which maps an unmodified program's sockets onto it. Both ends are this
// library, so the protocol on the wire is ours (docs/ARCHITECTURE.md, "rsockets"):
//
// Stream sockets: an RC QP per connection (made by rdma_cm). Each side posts kRecvSlots
// receives of kSlotSize bytes; every message consumes one, and its immediate data carries a
// type and the number of receives the sender has posted again since its last message
// (credits). Data goes as SENDs of at most kSlotSize bytes; a side keeps its last credit for
// the messages that return credits, and returns them without data when its peer runs low,
// so neither side can stall the other. riomap'ed buffers are announced with an IOMAP message
// and written with RDMA WRITE (riowrite), which uses no receive.
//
// Datagram sockets: a UD QP each; a datagram starts with a DgramHeader naming its sender, so
// a reply needs no resolution. A first datagram to an address resolves it through rdma_cm's
// UD service (SIDR) on the UDP port space: every bound datagram socket listens there.
//
// An rsocket is named by the fd of its rdma_cm event channel. Every call holds the socket's
// lock; blocking waits let go of it while they sleep in poll().
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace wharf::rdmacm::rs {

constexpr uint32_t kSlotSize = 64 * 1024;  // a stream message's payload at most
constexpr uint32_t kRecvSlots = 16;
constexpr uint32_t kSendSlots = 16;
constexpr uint32_t kDgramSlotSize = 4096;  // the device's UD payload limit (path MTU)
constexpr uint32_t kDgramSlots = 256;
constexpr uint32_t kGrhSize = 40;

// Immediate data of a stream message: type in the top 4 bits, credits returned in the rest.
enum class MsgType : uint32_t { kData = 0, kCredit = 1, kFin = 2, kIoMap = 3, kIoUnmap = 4 };
inline uint32_t make_imm(MsgType t, uint32_t credits) {
  return (static_cast<uint32_t>(t) << 28) | (credits & 0x0fffffff);
}
inline MsgType imm_type(uint32_t imm) { return static_cast<MsgType>(imm >> 28); }
inline uint32_t imm_credits(uint32_t imm) { return imm & 0x0fffffff; }

// The payload of an IOMAP message (and of IOUNMAP: offset only).
struct IoMapMsg {
  uint64_t offset;
  uint64_t addr;
  uint64_t len;
  uint32_t rkey;
  uint32_t reserved;
};

// Every datagram's first bytes: who sent it and how to answer it.
struct DgramHeader {
  uint32_t magic;
  uint16_t family;  // AF_INET or AF_INET6
  uint16_t port;    // network order
  uint8_t addr[16];
  uint8_t gid[16];
  uint32_t qpn;
  uint16_t lid;
  uint16_t reserved;
};
constexpr uint32_t kDgramMagic = 0x57524447;  // "WRDG"
constexpr uint32_t kDgramMax = kDgramSlotSize - sizeof(DgramHeader);

enum class Kind { kStream, kDgram };
enum class State {
  kIdle,
  kResolvingAddr,
  kResolvingRoute,
  kConnecting,
  kAccepting,
  kConnected,
  kListening,
  kError,
  kClosed
};

// A registered buffer of `count` slots of `size` bytes.
struct SlotBuffer {
  std::vector<uint8_t> mem;
  ibv_mr* mr = nullptr;
  uint32_t size = 0;
  uint8_t* slot(uint32_t i) { return mem.data() + static_cast<size_t>(i) * size; }
};

struct Received {  // a stream receive slot holding data the application has not read
  uint32_t slot;
  uint32_t len;
  uint32_t off;
};
struct RemoteMap {  // a peer's riomap'ed buffer
  uint64_t offset, addr, len;
  uint32_t rkey;
};
struct LocalMap {
  uint64_t offset;
  void* buf;
  size_t len;
  ibv_mr* mr;
};
struct Datagram {
  uint32_t slot;
  uint32_t offset;  // of the payload in the slot: after the GRH (if any) and the header
  uint32_t len;
  sockaddr_storage from;
};
struct Peer {  // where datagrams to one address go
  ibv_ah* ah = nullptr;
  uint32_t qpn = 0;
  uint32_t qkey = 0;
};

struct Socket {
  int id = -1;  // the event channel's fd
  Kind kind = Kind::kStream;
  int domain = AF_INET;
  std::mutex mu;
  State state = State::kIdle;
  int so_error = 0;  // SO_ERROR: the error of an asynchronous connect
  bool nonblocking = false;
  bool bound = false;
  bool reuseaddr = false;
  bool keepalive = false;
  bool nodelay = false;
  int keepidle = 7200;
  uint32_t sndbuf = kSlotSize * kSendSlots;
  uint32_t rcvbuf = kSlotSize * kRecvSlots;
  uint32_t inline_size = 64;
  uint32_t iomap_size = 0;

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* cm = nullptr;

  // Verbs resources, made once connected (stream) or bound (datagram).
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* comp = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;  // stream: cm->qp; datagram: our own UD QP
  SlotBuffer recv, send;
  std::vector<uint32_t> free_send;  // send slot indices available
  uint32_t unacked_events = 0;      // CQ events taken, to acknowledge before destroy

  // Stream.
  std::deque<Received> ready;
  uint32_t credits = 0;    // receives the peer has posted that we may still use
  uint32_t to_return = 0;  // receives we posted again, not yet reported to the peer
  uint64_t granted = 0;    // receives we have ever made available to the peer
  uint64_t consumed = 0;   // messages we have received from the peer
  bool peer_fin = false;   // the peer shut down writing (or disconnected)
  bool fin_sent = false;
  bool rd_shut = false;
  bool disconnected = false;
  std::vector<RemoteMap> remote_maps;
  // IOMAP/IOUNMAP messages waiting for a credit; they go before any later data.
  std::deque<std::pair<MsgType, IoMapMsg>> control;
  std::vector<LocalMap> local_maps;
  sockaddr_storage peer_addr{};
  std::deque<rdma_cm_id*> pending;  // listener: connection requests not yet accepted

  // Datagram.
  std::deque<Datagram> datagrams;
  std::map<std::vector<uint8_t>, Peer> peers;  // by address (family, port, ip)
  bool has_default = false;                    // rconnect's destination
  sockaddr_storage default_dst{};
  bool ethernet = false;  // the port's link layer: address handles need a GRH
  uint16_t lid = 0;       // ours, put in every datagram's header
  ibv_gid gid{};
  rdma_cm_id* resolving = nullptr;  // a SIDR query under way
  int resolve_status = 0;           // its outcome: 0 pending, 1 done, -errno failed
  Peer resolved;
};

// ---- the table (rsocket_core.cc) ----
std::shared_ptr<Socket> find(int id);
// Creates the socket: its event channel (non-blocking) and rdma_cm id. -1 with errno.
int create(int domain, int type, int protocol);
int destroy(int id);

// ---- progress and waiting (rsocket_core.cc) ----
// Takes what has happened without blocking: rdma_cm events and completions.
void progress(Socket* s);
// The socket fails with `err` (its first error stays SO_ERROR); a closed one stays closed.
void fail_socket(Socket* s, int err);
// Waits, letting go of `lock` while asleep, until done() holds, an error is recorded, or
// timeout_ms passes (-1: for ever). 0, or an errno (EAGAIN on a timeout or a non-blocking
// socket with nothing to do, EINTR when a signal ended the sleep).
template <class Done>
int wait_until(Socket* s, std::unique_lock<std::mutex>& lock, Done done, int timeout_ms);
// One sleep of the wait: arms the CQ, sleeps on the socket's fds up to timeout_ms.
int sleep_once(Socket* s, std::unique_lock<std::mutex>& lock, int timeout_ms);
// The fds a waiter sleeps on.
int wait_fds(Socket* s, pollfd fds[2]);

template <class Done>
int wait_until(Socket* s, std::unique_lock<std::mutex>& lock, Done done, int timeout_ms) {
  for (;;) {
    progress(s);
    if (done()) return 0;
    if (s->state == State::kError) return s->so_error != 0 ? s->so_error : ECONNRESET;
    if (s->nonblocking || timeout_ms == 0) return EAGAIN;
    if (int err = sleep_once(s, lock, timeout_ms); err != 0) return err;
  }
}

// ---- verbs resources (rsocket_core.cc) ----
// The CQ, its channel and the slot buffers, for a socket whose verbs context is known.
int make_cq_and_buffers(Socket* s, uint32_t recv_size, uint32_t recv_count, uint32_t send_size,
                        uint32_t send_count);
void free_resources(Socket* s);

// ---- stream (rsocket_stream.cc) ----
int stream_connect(Socket* s, std::unique_lock<std::mutex>& lock, const sockaddr* addr);
// 0 with the new socket's id in *accepted, or an errno.
int stream_accept(Socket* listener, std::unique_lock<std::mutex>& lock, sockaddr* addr,
                  socklen_t* addrlen, int* accepted);
ssize_t stream_send(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                    int flags);
ssize_t stream_recv(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                    int flags);
int stream_shutdown(Socket* s, std::unique_lock<std::mutex>& lock, int how);
void stream_close(Socket* s, std::unique_lock<std::mutex>& lock);
// Handles one completion of a stream socket.
void stream_completion(Socket* s, const ibv_wc& wc);
// The CM events of a stream socket (connect steps, requests, disconnection).
void stream_cm_event(Socket* s, rdma_cm_event* ev);
bool stream_readable(Socket* s);
bool stream_writable(Socket* s);
off_t stream_iomap(Socket* s, std::unique_lock<std::mutex>& lock, void* buf, size_t len, int prot,
                   off_t offset);
int stream_iounmap(Socket* s, std::unique_lock<std::mutex>& lock, void* buf, size_t len);
ssize_t stream_iowrite(Socket* s, std::unique_lock<std::mutex>& lock, const void* buf, size_t count,
                       off_t offset, int flags);

// ---- datagrams (rsocket_dgram.cc) ----
int dgram_bind(Socket* s, const sockaddr* addr);
int dgram_connect(Socket* s, std::unique_lock<std::mutex>& lock, const sockaddr* addr);
ssize_t dgram_send(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                   int flags, const sockaddr* to);
ssize_t dgram_recv(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                   int flags, sockaddr* from, socklen_t* fromlen);
void dgram_completion(Socket* s, const ibv_wc& wc);
void dgram_cm_event(Socket* s, rdma_cm_event* ev);

// ---- rpoll (rsocket_poll.cc) ----
// poll(2) over rsockets and ordinary fds: -1 with errno, or the number of fds with events.
int poll_sockets(pollfd* fds, nfds_t nfds, int timeout);

// ---- helpers ----
size_t iov_total(const iovec* iov, int iovcnt);
socklen_t addr_len(const sockaddr* a);
// Copies an address out as getsockname(2) does (truncating to *len, which gets the full size;
// a null `out` with *len 0 only learns the size).
void copy_addr_out(const sockaddr* a, sockaddr* out, socklen_t* len);
// getsockname(2)'s checks of a caller's name buffer: 0, EFAULT (no length, or no buffer for a
// nonzero length) or EINVAL (a negative length).
int check_name_buffer(const sockaddr* out, const socklen_t* len);

}  // namespace wharf::rdmacm::rs
