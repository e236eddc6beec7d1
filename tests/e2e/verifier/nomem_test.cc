// Running out of memory inside a verb: it must fail as rdma-core's do (NULL with errno
// ENOMEM, or ENOMEM returned), leave nothing behind in the router, and never let
// std::bad_alloc cross the C boundary (which would end the program in std::terminate).
//
// This binary replaces the global operator new, which our library (injected into it) binds
// to as well: once armed with a count n, the allocation after n more succeeds throws. Each
// verb runs with n = 0, 1, 2, ... until a run makes no more allocations than n, so every
// allocation it makes fails once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "verbs_fixture.h"

namespace {

// -1: disarmed; n >= 0: allocations to let through before one fails.
std::atomic<long> g_countdown{-1};

}  // namespace

void* operator new(size_t size) {
  if (g_countdown.load(std::memory_order_relaxed) >= 0 &&
      g_countdown.fetch_sub(1, std::memory_order_relaxed) == 0)
    throw std::bad_alloc();
  void* p = malloc(size != 0 ? size : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
// Every other form goes to the two above, so that all of them pair malloc with free: left to
// a sanitizer's runtime, `new (std::nothrow)` would come from its allocator and reach ours
// at `delete` (an alloc-dealloc mismatch under ASan).
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { free(p); }

namespace wharf::verify {
namespace {

constexpr long kMaxAllocations = 2000;

class NoMemoryTest : public VerbsTest {
 protected:
  // Runs make() with each of its allocations failing in turn. make() returns the object it
  // made (then undo(obj) frees it) or null, which must come from an injected failure with
  // errno ENOMEM. Returns how many allocations a successful make() needs.
  template <class Make, class Undo>
  static long fails_cleanly(const char* what, Make make, Undo undo) {
    for (long n = 0; n < kMaxAllocations; ++n) {
      errno = 0;
      g_countdown.store(n);
      decltype(make()) obj = nullptr;
      try {
        obj = make();
      } catch (const std::bad_alloc&) {
        g_countdown.store(-1);
        ADD_FAILURE() << what << " let std::bad_alloc out with allocation " << n << " failing";
        continue;
      }
      const int err = errno;
      const bool fired = g_countdown.exchange(-1) == -1;
      if (obj != nullptr) {
        undo(obj);
        if (!fired) return n;
        continue;  // the library got by without that allocation
      }
      EXPECT_TRUE(fired) << what << " failed with errno " << err << " but nothing was injected";
      EXPECT_EQ(err, ENOMEM) << what << " with allocation " << n << " failing";
      if (!fired) return n;
    }
    ADD_FAILURE() << what << " makes more than " << kMaxAllocations << " allocations";
    return kMaxAllocations;
  }

  // The same for a verb that returns 0 or an errno value: `call` must return 0 or ENOMEM.
  template <class Call>
  static long returns_enomem(const char* what, Call call) {
    for (long n = 0; n < kMaxAllocations; ++n) {
      g_countdown.store(n);
      int rc = 0;
      try {
        rc = call();
      } catch (const std::bad_alloc&) {
        g_countdown.store(-1);
        ADD_FAILURE() << what << " let std::bad_alloc out with allocation " << n << " failing";
        continue;
      }
      const bool fired = g_countdown.exchange(-1) == -1;
      if (rc == 0) {
        if (!fired) return n;
        continue;
      }
      EXPECT_TRUE(fired) << what << " returned " << rc << " but nothing was injected";
      EXPECT_EQ(rc, ENOMEM) << what << " with allocation " << n << " failing";
      if (!fired) return n;
    }
    ADD_FAILURE() << what << " makes more than " << kMaxAllocations << " allocations";
    return kMaxAllocations;
  }
};

TEST_F(NoMemoryTest, OpeningADeviceFailsWithEnomem) {
  fails_cleanly(
      "ibv_get_device_list",
      [] {
        int n = 0;
        return ibv_get_device_list(&n);
      },
      [](ibv_device** list) { ibv_free_device_list(list); });
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_EQ(n, 1);
  fails_cleanly(
      "ibv_open_device", [&] { return ibv_open_device(list[0]); },
      [](ibv_context* c) { ibv_close_device(c); });
  ibv_free_device_list(list);
}

TEST_F(NoMemoryTest, CreatingObjectsFailsWithEnomemAndLeavesNothingInTheRouter) {
  ibv_context* ctx = a_.ctx;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  Buffer buf = make_buffer(a_, 8192, kFullAccess);

  fails_cleanly(
      "ibv_alloc_pd", [&] { return ibv_alloc_pd(ctx); }, [](ibv_pd* p) { ibv_dealloc_pd(p); });
  fails_cleanly(
      "ibv_reg_mr", [&] { return ibv_reg_mr(pd, buf.data, 4096, kFullAccess); },
      [](ibv_mr* m) { ibv_dereg_mr(m); });
  fails_cleanly(
      "ibv_create_comp_channel", [&] { return ibv_create_comp_channel(ctx); },
      [](ibv_comp_channel* c) { ibv_destroy_comp_channel(c); });
  ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
  ASSERT_NE(channel, nullptr);
  fails_cleanly(
      "ibv_create_cq", [&] { return ibv_create_cq(ctx, 16, nullptr, channel, 0); },
      [](ibv_cq* c) { ibv_destroy_cq(c); });
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = 16;
  srq_attr.attr.max_sge = 1;
  fails_cleanly(
      "ibv_create_srq", [&] { return ibv_create_srq(pd, &srq_attr); },
      [](ibv_srq* s) { ibv_destroy_srq(s); });
  ibv_qp_init_attr qp_attr{};
  qp_attr.send_cq = cq;
  qp_attr.recv_cq = cq;
  qp_attr.qp_type = IBV_QPT_RC;
  qp_attr.cap.max_send_wr = 8;
  qp_attr.cap.max_recv_wr = 8;
  qp_attr.cap.max_send_sge = 1;
  qp_attr.cap.max_recv_sge = 1;
  fails_cleanly(
      "ibv_create_qp", [&] { return ibv_create_qp(pd, &qp_attr); },
      [](ibv_qp* q) { ibv_destroy_qp(q); });
  fails_cleanly(
      "ibv_alloc_mw", [&] { return ibv_alloc_mw(pd, IBV_MW_TYPE_2); },
      [](ibv_mw* w) { ibv_dealloc_mw(w); });
  ibv_ah_attr ah_attr{};
  ah_attr.dlid = a_.port.lid;
  ah_attr.port_num = 1;
  if (a_.port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    ah_attr.is_global = 1;
    ah_attr.grh.dgid = a_.gid;
    ah_attr.grh.hop_limit = 64;
  }
  fails_cleanly(
      "ibv_create_ah", [&] { return ibv_create_ah(pd, &ah_attr); },
      [](ibv_ah* h) { ibv_destroy_ah(h); });
  ibv_xrcd_init_attr xrcd_attr{};
  xrcd_attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xrcd_attr.fd = -1;
  xrcd_attr.oflags = O_CREAT;
  fails_cleanly(
      "ibv_open_xrcd", [&] { return ibv_open_xrcd(ctx, &xrcd_attr); },
      [](ibv_xrcd* x) { ibv_close_xrcd(x); });
  ibv_wq_init_attr wq_attr{};
  wq_attr.wq_type = IBV_WQT_RQ;
  wq_attr.max_wr = 8;
  wq_attr.max_sge = 1;
  wq_attr.pd = pd;
  wq_attr.cq = cq;
  fails_cleanly(
      "ibv_create_wq", [&] { return ibv_create_wq(ctx, &wq_attr); },
      [](ibv_wq* w) { ibv_destroy_wq(w); });

  // Whatever a failed verb made in the router would still hold the PD.
  ASSERT_EQ(ibv_destroy_cq(cq), 0);
  ASSERT_EQ(ibv_destroy_comp_channel(channel), 0);
  free_buffer(&buf);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(NoMemoryTest, DataVerbsAndStateChangesFailWithEnomemOrNotAtAll) {
  ibv_qp* qa = nullptr;
  ibv_qp* qb = nullptr;
  rc_pair(&qa, &qb);
  ASSERT_NE(qa, nullptr);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  Buffer dst = make_buffer(b_, 64, kFullAccess);
  returns_enomem("ibv_post_send", [&] {
    ibv_sge sge{reinterpret_cast<uint64_t>(src.data), 8, src.mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data);
    wr.wr.rdma.rkey = dst.mr->rkey;
    return ibv_post_send(qa, &wr, &bad);
  });
  ibv_qp_attr attr{};
  returns_enomem("ibv_modify_qp", [&] {
    attr.qp_state = IBV_QPS_RTS;
    attr.cur_qp_state = IBV_QPS_RTS;
    return ibv_modify_qp(qb, &attr, IBV_QP_STATE);
  });
  ibv_qp_init_attr init{};
  returns_enomem("ibv_query_qp", [&] { return ibv_query_qp(qa, &attr, IBV_QP_STATE, &init); });
  free_buffer(&src);
  free_buffer(&dst);
}

TEST_F(NoMemoryTest, RdmaCmAndRsocketsFailWithEnomem) {
  fails_cleanly(
      "rdma_create_event_channel", [] { return rdma_create_event_channel(); },
      [](rdma_event_channel* c) { rdma_destroy_event_channel(c); });
  rdma_event_channel* channel = rdma_create_event_channel();
  ASSERT_NE(channel, nullptr);
  fails_cleanly(
      "rdma_create_id",
      [&] {
        rdma_cm_id* id = nullptr;
        return rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) == 0 ? id : nullptr;
      },
      [](rdma_cm_id* id) { rdma_destroy_id(id); });
  fails_cleanly(
      "rdma_getaddrinfo",
      [] {
        rdma_addrinfo hints{};
        hints.ai_flags = RAI_NUMERICHOST | RAI_PASSIVE;
        hints.ai_port_space = RDMA_PS_TCP;
        rdma_addrinfo* res = nullptr;
        return rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res) == 0 ? res : nullptr;
      },
      [](rdma_addrinfo* res) { rdma_freeaddrinfo(res); });
  rdma_destroy_event_channel(channel);
  // An rsocket is a number, not a pointer: 0 stands for "none".
  fails_cleanly(
      "rsocket",
      [] {
        const int fd = rsocket(AF_INET, SOCK_STREAM, 0);
        return fd >= 0 ? reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1) : nullptr;
      },
      [](void* fd) { rclose(static_cast<int>(reinterpret_cast<intptr_t>(fd) - 1)); });
}

}  // namespace
}  // namespace wharf::verify
