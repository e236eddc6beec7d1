// Event-driven completion loops (ibv_req_notify_cq, ibv_get_cq_event, ibv_ack_cq_events) as
// qperf and other event-mode programs write them: no completion or event may be lost, and a
// signal interrupts a blocking ibv_get_cq_event with EINTR as the kernel's read() does, so a
// program's timer can end its wait. Each case runs in a forked child (which opens its own
// device, as after fork() it must) so that a wait that never ends fails the test in bounded
// time instead of hanging it.
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

// Runs fn in a forked child and returns its exit status, or -1 when it did not end within
// limit_ms (it is then killed).
template <class Fn>
int run_child(Fn fn, int limit_ms) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

ibv_context* open_wharf0() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = n == 1 ? ibv_open_device(list[0]) : nullptr;
  ibv_free_device_list(list);
  return ctx;
}

volatile sig_atomic_t alarms = 0;
void on_alarm(int) { alarms = alarms + 1; }

// One side of a ping-pong: a QP whose completions go to a CQ with a completion channel.
struct Peer {
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64] = {};
};

// A peer on its own channel, or on `shared` when given.
bool make_peer(ibv_context* ctx, ibv_pd* pd, ibv_qp_type type, Peer* p,
               ibv_comp_channel* shared = nullptr) {
  p->ch = shared != nullptr ? shared : ibv_create_comp_channel(ctx);
  p->cq = p->ch != nullptr ? ibv_create_cq(ctx, 16, nullptr, p->ch, 0) : nullptr;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = p->cq;
  init.qp_type = type;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  p->qp = p->cq != nullptr ? ibv_create_qp(pd, &init) : nullptr;
  p->mr = ibv_reg_mr(pd, p->buf, sizeof(p->buf), IBV_ACCESS_LOCAL_WRITE);
  return p->qp != nullptr && p->mr != nullptr && ibv_req_notify_cq(p->cq, 0) == 0;
}

bool connect_to(ibv_context* ctx, Peer* p, const Peer& remote) {
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) return false;
  const bool rc = p->qp->qp_type == IBV_QPT_RC;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (ibv_modify_qp(p->qp, &a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote.qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.dlid = port.lid;
  a.ah_attr.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (rc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (ibv_modify_qp(p->qp, &a, mask) != 0) return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rc) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return ibv_modify_qp(p->qp, &a, mask) == 0;
}

bool post_recv(Peer* p) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(p->buf), sizeof(p->buf), p->mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = 2;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(p->qp, &wr, &bad) == 0;
}

bool post_send(Peer* p) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(p->buf), 8, p->mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  return ibv_post_send(p->qp, &wr, &bad) == 0;
}

// qperf's loop: wait for an event, re-arm, acknowledge, poll. Sends after each receive
// (the client first); done after `rounds` receives and sends. Returns 0 or a step number.
int pingpong(Peer* p, int rounds, bool first) {
  int sent = 0, received = 0;
  bool send_done = true;
  if (first) {
    if (!post_send(p)) return 1;
    send_done = false;
    ++sent;
  }
  while (received < rounds || !send_done) {
    ibv_cq* ecq = nullptr;
    void* ectx = nullptr;
    if (ibv_get_cq_event(p->ch, &ecq, &ectx) != 0) return 2;
    if (ibv_req_notify_cq(p->cq, 0) != 0) return 3;
    ibv_ack_cq_events(p->cq, 1);
    ibv_wc wc[2];
    int n = ibv_poll_cq(p->cq, 2, wc);
    if (n < 0) return 4;
    bool reply = false;
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return 5;
      if (wc[i].wr_id == 1) send_done = true;
      if (wc[i].wr_id == 2) {
        ++received;
        if (!post_recv(p)) return 6;
        reply = sent < rounds;
      }
    }
    if (reply) {
      if (!post_send(p)) return 7;
      send_done = false;
      ++sent;
    }
  }
  return 0;
}

// Both sides in one child: each on its own thread, CQ and completion channel.
int event_pingpong_child(ibv_qp_type type, int rounds) {
  ibv_context* ctx = open_wharf0();
  if (ctx == nullptr) return 10;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Peer a, b;
  if (pd == nullptr || !make_peer(ctx, pd, type, &a) || !make_peer(ctx, pd, type, &b)) return 11;
  if (!connect_to(ctx, &a, b) || !connect_to(ctx, &b, a)) return 12;
  if (!post_recv(&a) || !post_recv(&b)) return 13;
  std::atomic<int> server_result{-1};
  std::thread server([&] { server_result = pingpong(&b, rounds, false); });
  int client_result = pingpong(&a, rounds, true);
  server.join();
  if (client_result != 0) return 20 + client_result;
  if (server_result != 0) return 40 + server_result;
  ibv_close_device(ctx);
  return 0;
}

// Many CQs on one channel, each with its event raised before the application reads any:
// 8 RC pairs, one SEND each, every CQ armed, then one ibv_get_cq_event per CQ. Returns 0 or a
// step number; a lost event leaves the last wait waiting.
int many_cqs_one_channel_child() {
  constexpr int kPairs = 8;
  ibv_context* ctx = open_wharf0();
  if (ctx == nullptr) return 10;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_comp_channel* ch = pd != nullptr ? ibv_create_comp_channel(ctx) : nullptr;
  if (ch == nullptr) return 11;
  static Peer peers[2 * kPairs];
  for (Peer& p : peers)
    if (!make_peer(ctx, pd, IBV_QPT_RC, &p, ch)) return 12;
  for (int i = 0; i < kPairs; ++i) {
    Peer &a = peers[2 * i], &b = peers[2 * i + 1];
    if (!connect_to(ctx, &a, b) || !connect_to(ctx, &b, a) || !post_recv(&b)) return 13;
  }
  for (int i = 0; i < kPairs; ++i)
    if (!post_send(&peers[2 * i])) return 14;
  usleep(200000);  // every event raised, none read
  int seen[2 * kPairs] = {};
  for (int n = 0; n < 2 * kPairs; ++n) {
    ibv_cq* ecq = nullptr;
    void* ectx = nullptr;
    if (ibv_get_cq_event(ch, &ecq, &ectx) != 0) return 15;
    ibv_ack_cq_events(ecq, 1);
    for (int i = 0; i < 2 * kPairs; ++i) seen[i] += peers[i].cq == ecq ? 1 : 0;
  }
  for (int count : seen)
    if (count != 1) return 16;
  return 0;
}

class EventTest : public VerbsTest {};

// A signal whose handler does not ask for restarting ends a blocking ibv_get_cq_event with
// -1 and EINTR, as rdma-core's read() of the channel does; qperf's test timer relies on it.
TEST_F(EventTest, ASignalInterruptsGetCqEvent) {
  int status = run_child(
      [] {
        ibv_context* ctx = open_wharf0();
        if (ctx == nullptr) return 10;
        ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
        ibv_cq* cq = ch != nullptr ? ibv_create_cq(ctx, 4, nullptr, ch, 0) : nullptr;
        if (cq == nullptr || ibv_req_notify_cq(cq, 0) != 0) return 11;
        struct sigaction sa {};
        sa.sa_handler = on_alarm;  // no SA_RESTART
        sigaction(SIGALRM, &sa, nullptr);
        itimerval t{};
        t.it_value.tv_usec = 100000;
        setitimer(ITIMER_REAL, &t, nullptr);
        ibv_cq* ecq = nullptr;
        void* ectx = nullptr;
        int r = ibv_get_cq_event(ch, &ecq, &ectx);
        if (r != -1) return 12;
        if (errno != EINTR) return 13;
        return alarms == 1 ? 0 : 14;
      },
      10000);
  EXPECT_EQ(status, 0) << "-1: ibv_get_cq_event did not return after the signal";
}

// Many short event-driven tests in a row, a process each (qperf runs each test so), over RC
// and UC: every completion and event arrives.
// Sixteen CQs of one channel whose events are all raised before the application reads one:
// none is lost. (The channel's socket is one of a connected pair, so the kernel bounds what
// it holds by the sender's buffer, hundreds of events, not by net.unix.max_dgram_qlen, 10.)
TEST_F(EventTest, SixteenCqsOfOneChannelLoseNoEvent) {
  const int status = run_child([] { return many_cqs_one_channel_child(); }, 20000);
  ASSERT_EQ(status, 0) << "-1 means an event never came";
}

TEST_F(EventTest, ManyShortEventDrivenPingPongsLoseNothing) {
  for (int i = 0; i < 12; ++i) {
    const ibv_qp_type type = i % 2 == 0 ? IBV_QPT_RC : IBV_QPT_UC;
    int status = run_child([type] { return event_pingpong_child(type, 300); }, 20000);
    ASSERT_EQ(status, 0) << "run " << i << (type == IBV_QPT_RC ? " (RC)" : " (UC)")
                         << ": -1 means a completion or event never came";
  }
}

}  // namespace
}  // namespace wharf::verify
