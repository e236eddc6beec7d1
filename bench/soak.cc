// The restart soak's load and its verifier (issue #23, item 5; bench/soak.sh drives it): one
// verbs context on each host's router (three sockets), `pairs` RC QP pairs between them
// (pair k from host k % 3 to host (k + 1) % 3), each running a cycle of mixed operations,
// one at a time, for `seconds`:
//   SEND of message n (its number and a pattern of it), checked at the receiver: the n-th
//     receive of the pair holds message n (nothing lost, repeated or reordered);
//   WRITE of pattern n into the pair's slot at the responder, then a READ of that slot back,
//     which must hold pattern n (the WRITE landed once, whole);
//   FETCH_ADD 1 on the pair's counter, which must return the number of adds before it (none
//     lost or executed twice).
// Every completion must succeed. Prints a progress line every 10 s ("t <s> ops <n>"), and at
// the end "ok <ops>" (exit 0) or the first failure (exit 1). Links Debian's libibverbs; run
// with ours injected. ACK timeout 19 (2.1 s) and 7 retries: the QPs outlast a router restart
// or a link cut of a few seconds.
//
//   wharf-soak <seconds> <pairs> <router_socket_1> <router_socket_2> <router_socket_3>
#include <infiniband/verbs.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "rc_qp.h"

namespace {

constexpr int kHosts = 3;
constexpr uint32_t kMsg = 512;  // a SEND's and a WRITE's bytes
constexpr uint8_t kAckTimeout = 19;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;

// Each pair's memory at either end: a SEND or receive buffer, a WRITE or READ buffer, the
// counter (responder) or fetched value (requester).
struct PairMemory {
  uint8_t send[kMsg];
  uint8_t data[kMsg];
  uint64_t word;
};

struct Host {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<PairMemory> memory;  // one per pair (only the pairs with an end here use it)
  uint16_t lid = 0;
};

enum class Step : uint8_t { kSend, kWrite, kRead, kAdd };

struct Pair {
  int from = 0, to = 0;  // hosts
  ibv_qp* requester = nullptr;
  ibv_qp* responder = nullptr;
  uint64_t n = 0;         // the cycle's number
  uint64_t received = 0;  // messages the responder took
  Step step = Step::kSend;
  bool send_done = false, recv_done = false;
};

void fill(uint8_t* p, uint64_t n) {
  uint64_t x = n * 0x9e3779b97f4a7c15ull + 1;
  for (uint32_t i = 0; i < kMsg; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = static_cast<uint8_t>(x);
  }
  std::memcpy(p, &n, sizeof(n));
}
bool holds(const uint8_t* p, uint64_t n) {
  uint8_t want[kMsg];
  fill(want, n);
  return std::memcmp(p, want, kMsg) == 0;
}

bool open_host(Host* h, size_t pairs) {
  ibv_device** list = ibv_get_device_list(nullptr);
  if (list == nullptr || list[0] == nullptr) return false;
  h->ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (h->ctx == nullptr) return false;
  h->pd = ibv_alloc_pd(h->ctx);
  h->cq = ibv_create_cq(h->ctx, static_cast<int>(4 * pairs + 16), nullptr, nullptr, 0);
  h->memory.resize(pairs);
  h->mr = h->pd == nullptr
              ? nullptr
              : ibv_reg_mr(h->pd, h->memory.data(), h->memory.size() * sizeof(PairMemory), kAccess);
  ibv_port_attr port{};
  if (h->cq == nullptr || h->mr == nullptr || ibv_query_port(h->ctx, 1, &port) != 0) return false;
  h->lid = port.lid;
  return true;
}

ibv_qp* make_qp(Host* h) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = h->cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {2, 2, 1, 1, 0};
  return ibv_create_qp(h->pd, &init);
}

// wr_id: pair index << 2 | what completed (0 send-side work, 1 receive).
uint64_t wr_id(size_t k, int kind) { return (uint64_t{k} << 2) | static_cast<uint64_t>(kind); }

int post_recv(Host* h, Pair& p, size_t k) {
  ibv_sge sge{reinterpret_cast<uint64_t>(h->memory[k].send), kMsg, h->mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id(k, 1);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(p.responder, &wr, &bad);
}

// Posts pair k's current step.
int post_step(std::vector<Host>& hosts, Pair& p, size_t k) {
  Host& a = hosts[static_cast<size_t>(p.from)];
  Host& b = hosts[static_cast<size_t>(p.to)];
  PairMemory& mine = a.memory[k];
  PairMemory& theirs = b.memory[k];
  ibv_sge sge{0, kMsg, a.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id(k, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  switch (p.step) {
    case Step::kSend:
      fill(mine.send, p.n);
      sge.addr = reinterpret_cast<uint64_t>(mine.send);
      wr.opcode = IBV_WR_SEND;
      p.send_done = p.recv_done = false;
      break;
    case Step::kWrite:
    case Step::kRead:
      if (p.step == Step::kWrite)
        fill(mine.data, p.n);
      else
        std::memset(mine.data, 0, kMsg);
      sge.addr = reinterpret_cast<uint64_t>(mine.data);
      wr.opcode = p.step == Step::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(theirs.data);
      wr.wr.rdma.rkey = b.mr->rkey;
      break;
    case Step::kAdd:
      sge.addr = reinterpret_cast<uint64_t>(&mine.word);
      sge.length = 8;
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.wr.atomic.remote_addr = reinterpret_cast<uint64_t>(&theirs.word);
      wr.wr.atomic.rkey = b.mr->rkey;
      wr.wr.atomic.compare_add = 1;
      break;
  }
  return ibv_post_send(p.requester, &wr, &bad);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 + kHosts) {
    fprintf(stderr, "usage: %s <seconds> <pairs> <router_socket> x%d\n", argv[0], kHosts);
    return 2;
  }
  const double seconds = atof(argv[1]);
  const auto pairs = static_cast<size_t>(atol(argv[2]));
  std::vector<Host> hosts(kHosts);
  for (int h = 0; h < kHosts; ++h) {
    setenv("WHARF_ROUTER", argv[3 + h], 1);  // read at each ibv_open_device
    if (!open_host(&hosts[static_cast<size_t>(h)], pairs)) {
      fprintf(stderr, "FAIL: cannot open wharf0 on %s\n", argv[3 + h]);
      return 1;
    }
  }
  std::vector<Pair> ps(pairs);
  for (size_t k = 0; k < pairs; ++k) {
    Pair& p = ps[k];
    p.from = static_cast<int>(k % kHosts);
    p.to = (p.from + 1) % kHosts;
    Host& a = hosts[static_cast<size_t>(p.from)];
    Host& b = hosts[static_cast<size_t>(p.to)];
    p.requester = make_qp(&a);
    p.responder = make_qp(&b);
    const char* failed = p.requester == nullptr || p.responder == nullptr ? "create" : nullptr;
    if (failed == nullptr)
      failed = rc_qp_to_rts(p.requester, p.responder->qp_num, b.lid, kAckTimeout, kAccess);
    if (failed == nullptr)
      failed = rc_qp_to_rts(p.responder, p.requester->qp_num, a.lid, kAckTimeout, kAccess);
    if (failed != nullptr || post_recv(&b, p, k) != 0 || post_step(hosts, p, k) != 0) {
      fprintf(stderr, "FAIL: pair %zu: %s\n", k, failed != nullptr ? failed : "post");
      return 1;
    }
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  Clock::time_point report = t0;
  uint64_t ops = 0;
  bool stopping = false;
  size_t busy = pairs;  // pairs with a step outstanding
  while (busy > 0) {
    const Clock::time_point now = Clock::now();
    if (!stopping && std::chrono::duration<double>(now - t0).count() >= seconds) stopping = true;
    if (now - report >= std::chrono::seconds(10)) {
      report = now;
      printf("t %.0f ops %llu\n", std::chrono::duration<double>(now - t0).count(),
             static_cast<unsigned long long>(ops));
      fflush(stdout);
    }
    for (Host& h : hosts) {
      ibv_wc wc[32];
      const int n = ibv_poll_cq(h.cq, 32, wc);
      if (n < 0) {
        fprintf(stderr, "FAIL: poll_cq\n");
        return 1;
      }
      for (int i = 0; i < n; ++i) {
        const size_t k = wc[i].wr_id >> 2;
        if (k >= pairs) {
          fprintf(stderr, "FAIL: a completion of no pair (wr_id %llu)\n",
                  static_cast<unsigned long long>(wc[i].wr_id));
          return 1;
        }
        Pair& p = ps[k];
        if (wc[i].status != IBV_WC_SUCCESS) {
          fprintf(stderr, "FAIL: pair %zu cycle %llu step %d: %s\n", k,
                  static_cast<unsigned long long>(p.n), static_cast<int>(p.step),
                  ibv_wc_status_str(wc[i].status));
          return 1;
        }
        Host& b = hosts[static_cast<size_t>(p.to)];
        const PairMemory& mine = hosts[static_cast<size_t>(p.from)].memory[k];
        if ((wc[i].wr_id & 3) == 1) {  // the responder took message `received`
          if (!holds(b.memory[k].send, p.received)) {
            uint64_t got = 0;
            std::memcpy(&got, b.memory[k].send, sizeof(got));
            fprintf(stderr, "FAIL: pair %zu: receive %llu holds message %llu\n", k,
                    static_cast<unsigned long long>(p.received),
                    static_cast<unsigned long long>(got));
            return 1;
          }
          ++p.received;
          p.recv_done = true;
          if (post_recv(&b, p, k) != 0) {
            fprintf(stderr, "FAIL: pair %zu: post_recv\n", k);
            return 1;
          }
        } else if (p.step == Step::kSend) {
          p.send_done = true;
        } else if (p.step == Step::kRead && !holds(mine.data, p.n)) {
          fprintf(stderr, "FAIL: pair %zu: the READ of cycle %llu did not bring back its WRITE\n",
                  k, static_cast<unsigned long long>(p.n));
          return 1;
        } else if (p.step == Step::kAdd && mine.word != p.n) {
          fprintf(stderr, "FAIL: pair %zu: add %llu returned %llu (lost or repeated)\n", k,
                  static_cast<unsigned long long>(p.n), static_cast<unsigned long long>(mine.word));
          return 1;
        }
        // The step is over once its completions are in (a SEND's: both ends').
        if (p.step == Step::kSend && !(p.send_done && p.recv_done)) continue;
        ++ops;
        if (p.step == Step::kAdd) {
          p.step = Step::kSend;
          ++p.n;
        } else {
          p.step = static_cast<Step>(static_cast<int>(p.step) + 1);
        }
        if (stopping && p.step == Step::kSend) {
          --busy;
          continue;
        }
        if (post_step(hosts, p, k) != 0) {
          fprintf(stderr, "FAIL: pair %zu: post_send\n", k);
          return 1;
        }
      }
    }
  }
  printf("ok %llu\n", static_cast<unsigned long long>(ops));
  return 0;
}
