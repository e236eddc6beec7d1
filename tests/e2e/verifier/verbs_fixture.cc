#include "verbs_fixture.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

namespace wharf::verify {

RouterProcess* VerbsTest::router_ = nullptr;

RouterProcess::RouterProcess(const std::vector<std::string>& extra_args) {
  char tmpl[] = "/tmp/wharf-verify.XXXXXX";
  dir_ = mkdtemp(tmpl);
  // WHARF_VERIFY_DIRECT_PATH=off runs every test with all work through the router.
  const char* direct = getenv("WHARF_VERIFY_DIRECT_PATH");
  args_ = {"wharfd",
           "--socket",
           socket(),
           "--log-level",
           "warn",
           "--direct-path",
           direct != nullptr ? direct : "on"};
  args_.insert(args_.end(), extra_args.begin(), extra_args.end());
  start();
  // The contexts opened from now on use this router; a restart leaves the environment alone,
  // as a supervisor restarting a router does the applications'.
  setenv("WHARF_ROUTER", socket().c_str(), 1);
}

void RouterProcess::start() {
  std::vector<char*> argv;
  for (std::string& a : args_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string sock = socket();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive a crashed test process
    unsetenv("LD_PRELOAD");
    unsetenv("LD_LIBRARY_PATH");
    execv(WHARFD_PATH, argv.data());
    _exit(127);
  }
  for (int i = 0; i < 500; ++i) {
    struct stat st;
    if (stat(sock.c_str(), &st) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "wharfd did not create " << sock;
}

void RouterProcess::restart() {
  kill_hard();
  unlink(socket().c_str());  // as a supervisor would find it: the dead router's socket
  start();
}

void RouterProcess::upgrade() {
  const std::string sock = socket();
  const pid_t p = fork();
  if (p == 0) {
    unsetenv("LD_PRELOAD");
    unsetenv("LD_LIBRARY_PATH");
    execl(WHARFD_PATH, "wharfd", "--upgrade", "--socket", sock.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(p, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    ADD_FAILURE() << "wharfd --upgrade --socket " << sock << " failed: " << status;
}

void RouterProcess::kill_hard() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void RouterProcess::pause() { ::kill(pid_, SIGSTOP); }
void RouterProcess::resume() { ::kill(pid_, SIGCONT); }

RouterProcess::~RouterProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 500 && !exited; ++i) {
      exited = waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      ADD_FAILURE() << "wharfd ignored SIGTERM for 5 s";
      kill_hard();
    }
  }
  unlink(socket().c_str());
  unlink((socket() + ".key").c_str());    // the router's resume key (wharfd --resume-key)
  unlink((socket() + ".state").c_str());  // its kept QP states (a cluster's routers)
  unlink((socket() + ".cm").c_str());     // its kept rdma_cm ids
  rmdir(dir_.c_str());
}

void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<uint8_t>(x >> 24);
  }
}

void VerbsTest::SetUpTestSuite() { router_ = new RouterProcess(); }
void VerbsTest::TearDownTestSuite() {
  delete router_;
  router_ = nullptr;
}

void VerbsTest::SetUp() {
  a_ = open_side();
  b_ = open_side();
}

void VerbsTest::TearDown() {
  close_side(&a_);
  close_side(&b_);
}

Side VerbsTest::open_side() {
  Side s;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  EXPECT_EQ(n, 1);
  if (n < 1) return s;
  EXPECT_STREQ(ibv_get_device_name(list[0]), "wharf0");
  s.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  EXPECT_NE(s.ctx, nullptr);
  if (s.ctx == nullptr) return s;
  EXPECT_EQ(ibv_query_port(s.ctx, 1, &s.port), 0);
  EXPECT_EQ(ibv_query_gid(s.ctx, 1, 0, &s.gid), 0);
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
  EXPECT_NE(s.pd, nullptr);
  EXPECT_NE(s.cq, nullptr);
  return s;
}

void VerbsTest::close_side(Side* s) {
  // Closing the device frees everything left in the router (as process exit would).
  if (s->ctx != nullptr) ibv_close_device(s->ctx);
  *s = Side{};
}

Buffer VerbsTest::make_buffer(Side& s, size_t len, int access, size_t misalign) {
  Buffer b;
  size_t total = ((len + misalign + 4095) / 4096) * 4096;
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  b.data = static_cast<uint8_t*>(p) + misalign;
  b.len = len;
  std::memset(b.data, 0, len);
  b.mr = ibv_reg_mr(s.pd, b.data, len, access);
  EXPECT_NE(b.mr, nullptr) << strerror(errno);
  return b;
}

void VerbsTest::free_buffer(Buffer* b) {
  if (b->mr != nullptr) ibv_dereg_mr(b->mr);
  b->mr = nullptr;
}

namespace {

ibv_qp* make_qp(ibv_pd* pd, ibv_cq* cq, ibv_qp_type type, ibv_srq* srq, uint32_t depth,
                uint32_t sges, uint32_t inline_size) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.srq = srq;
  init.qp_type = type;
  init.cap.max_send_wr = depth;
  init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = sges;
  init.cap.max_recv_sge = sges;
  init.cap.max_inline_data = inline_size;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  EXPECT_NE(qp, nullptr) << strerror(errno);
  return qp;
}

}  // namespace

ibv_qp* VerbsTest::create_qp(Side& s, ibv_qp_type type, ibv_srq* srq, uint32_t depth, uint32_t sges,
                             uint32_t inline_size) {
  return make_qp(s.pd, s.cq, type, srq, depth, sges, inline_size);
}

std::set<uintptr_t> mappings_named(const char* name) {
  std::set<uintptr_t> out;
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  while (f != nullptr && fgets(line, sizeof(line), f) != nullptr) {
    if (strstr(line, name) == nullptr) continue;
    out.insert(static_cast<uintptr_t>(strtoull(line, nullptr, 16)));
  }
  if (f != nullptr) fclose(f);
  return out;
}

ibv_qp* VerbsTest::create_qp_mapped(Side& s, ibv_qp_type type, uint8_t** region, ibv_srq* srq) {
  auto before = mappings_named("wharf-qp");
  ibv_qp* qp = create_qp(s, type, srq);
  *region = nullptr;
  for (uintptr_t a : mappings_named("wharf-qp"))
    if (before.count(a) == 0) *region = reinterpret_cast<uint8_t*>(a);
  if (*region == nullptr) ADD_FAILURE() << "QP region mapping not found";
  return qp;
}

void VerbsTest::open_sides_on(const std::string& a, const std::string& b) {
  setenv("WHARF_ROUTER", a.c_str(), 1);
  a_ = open_side();
  setenv("WHARF_ROUTER", b.c_str(), 1);
  b_ = open_side();
}

ibv_srq* VerbsTest::create_xrc_srq(Side& s, ibv_xrcd* x) {
  ibv_srq_init_attr_ex attr{};
  attr.attr.max_wr = 16;
  attr.attr.max_sge = 1;
  attr.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  attr.srq_type = IBV_SRQT_XRC;
  attr.pd = s.pd;
  attr.xrcd = x;
  attr.cq = s.cq;
  return ibv_create_srq_ex(s.ctx, &attr);
}

ibv_qp* VerbsTest::create_xrc_target(Side& s, ibv_xrcd* x) {
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_XRC_RECV;
  attr.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  attr.xrcd = x;
  return ibv_create_qp_ex(s.ctx, &attr);
}

ibv_qp* VerbsTest::create_xrc_initiator(Side& s) {
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_XRC_SEND;
  attr.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr.pd = s.pd;
  attr.send_cq = s.cq;
  attr.cap.max_send_wr = 16;
  attr.cap.max_send_sge = 1;
  return ibv_create_qp_ex(s.ctx, &attr);
}

int VerbsTest::post_xrc(ibv_qp* qp, ibv_wr_opcode op, ibv_sge sge, uint32_t srqn, uint64_t wr_id,
                        uint64_t raddr, uint32_t rkey, uint64_t add) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = srqn;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = add;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

ibv_qp* VerbsTest::create_rc_qp_on(Side& s, ibv_cq* cq, uint32_t depth) {
  return make_qp(s.pd, cq, IBV_QPT_RC, nullptr, depth, 4, 256);
}

ibv_qp_ex* VerbsTest::rc_pair_ex(Side& s, uint64_t send_ops, Side& peer, ibv_qp** remote) {
  ibv_qp_init_attr_ex init{};
  init.send_cq = s.cq;
  init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 64;
  init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  init.pd = s.pd;
  init.send_ops_flags = send_ops;
  ibv_qp* qp = ibv_create_qp_ex(s.ctx, &init);
  EXPECT_NE(qp, nullptr) << strerror(errno);
  *remote = create_qp(peer, IBV_QPT_RC);
  if (qp == nullptr || *remote == nullptr) return nullptr;
  constexpr int kAccess =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  connect(qp, s, *remote, peer, kAccess);
  connect(*remote, peer, qp, s, kAccess);
  return ibv_qp_to_qp_ex(qp);
}

int VerbsTest::post_atomic_write(ibv_qp_ex* qx, uint64_t value, uint64_t raddr, uint32_t rkey,
                                 uint64_t wr_id) {
  ibv_wr_start(qx);
  qx->wr_id = wr_id;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(qx, rkey, raddr, &value);
  return ibv_wr_complete(qx);
}

void VerbsTest::connected_rc_pair(Side& xs, ibv_qp** x, Side& ys, ibv_qp** y) {
  *x = create_qp(xs, IBV_QPT_RC);
  *y = create_qp(ys, IBV_QPT_RC);
  ASSERT_NE(*x, nullptr);
  ASSERT_NE(*y, nullptr);
  connect(*x, xs, *y, ys, kFullAccess);
  connect(*y, ys, *x, xs, kFullAccess);
}

void VerbsTest::connect(ibv_qp* qp, Side& ls, ibv_qp* remote, Side& rs, int access,
                        uint8_t rnr_retry, uint8_t retry_cnt, uint8_t timeout,
                        uint8_t min_rnr_timer) {
  (void)ls;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = access;
  ASSERT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      0);
  // Per type as the kernel's table: RC and XRC targets respond (RNR timer, responder
  // resources), RC and XRC initiators request (timeouts, retries, initiator resources).
  const bool rc = qp->qp_type == IBV_QPT_RC;
  const bool responds = rc || qp->qp_type == IBV_QPT_XRC_RECV;
  const bool requests = rc || qp->qp_type == IBV_QPT_XRC_SEND;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = remote->qp_num;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = min_rnr_timer;
  a.ah_attr.dlid = rs.port.lid;
  a.ah_attr.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (responds) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = timeout;
  a.retry_cnt = retry_cnt;
  a.rnr_retry = rnr_retry;
  a.max_rd_atomic = 4;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (requests)
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  if (qp->qp_type == IBV_QPT_XRC_RECV) mask |= IBV_QP_TIMEOUT;
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
}

void VerbsTest::to_rts_ud(ibv_qp* qp, uint32_t qkey) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

void VerbsTest::rc_pair(ibv_qp** qa, ibv_qp** qb, ibv_qp_type type) {
  *qa = create_qp(a_, type);
  *qb = create_qp(b_, type);
  ASSERT_NE(*qa, nullptr);
  ASSERT_NE(*qb, nullptr);
  int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (type == IBV_QPT_UC) access = IBV_ACCESS_REMOTE_WRITE;
  connect(*qa, a_, *qb, b_, access);
  connect(*qb, b_, *qa, a_, access);
}

std::vector<ibv_wc> VerbsTest::wait_wc(ibv_cq* cq, int n, std::chrono::seconds limit) {
  std::vector<ibv_wc> out;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (static_cast<int>(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[16];
    int got = ibv_poll_cq(cq, 16, wc);
    EXPECT_GE(got, 0);
    for (int i = 0; i < got; ++i) out.push_back(wc[i]);
    if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  EXPECT_EQ(static_cast<int>(out.size()), n) << "completions missing";
  return out;
}

ibv_wc VerbsTest::wait_one(ibv_cq* cq, std::chrono::seconds limit) {
  std::vector<ibv_wc> wc = wait_wc(cq, 1, limit);
  EXPECT_EQ(wc.size(), 1u);
  if (wc.size() == 1) return wc[0];
  ibv_wc none{};
  none.status = IBV_WC_GENERAL_ERR;
  return none;
}

ibv_recv_wr one_sge_recv(Buffer& b, size_t off, uint32_t len, uint64_t wr_id, ibv_sge* sge) {
  *sge = ibv_sge{reinterpret_cast<uint64_t>(b.data + off), len, b.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = 1;
  return wr;
}

void VerbsTest::post_recv(ibv_qp* qp, Buffer& b, size_t off, uint32_t len, uint64_t wr_id) {
  ibv_sge sge;
  ibv_recv_wr wr = one_sge_recv(b, off, len, wr_id, &sge);
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
}

ibv_srq* VerbsTest::create_srq(Side& s, uint32_t max_wr) {
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = max_wr;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(s.pd, &sa);
  EXPECT_NE(srq, nullptr) << strerror(errno);
  return srq;
}

void VerbsTest::post_srq_recv(ibv_srq* srq, Buffer& b, size_t off, uint32_t len, uint64_t wr_id) {
  ibv_sge sge;
  ibv_recv_wr wr = one_sge_recv(b, off, len, wr_id, &sge);
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
}

int VerbsTest::post_send(ibv_qp* qp, ibv_wr_opcode op, std::vector<ibv_sge> sges, uint64_t wr_id,
                         int flags, uint64_t raddr, uint32_t rkey) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  wr.send_flags = flags;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int VerbsTest::post_bind(ibv_qp* qp, ibv_mw* mw, uint32_t rkey, ibv_mr* mr, uint64_t addr,
                         uint64_t len, unsigned int access, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info = ibv_mw_bind_info{mr, addr, len, access};
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int VerbsTest::post_invalidate(ibv_qp* qp, ibv_wr_opcode op, std::vector<ibv_sge> sges,
                               uint32_t key, uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sges.data();
  wr.num_sge = static_cast<int>(sges.size());
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = key;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int VerbsTest::post_ud(ibv_qp* qp, ibv_ah* ah, uint32_t qpn, uint32_t qkey, uint64_t addr,
                       uint32_t len, uint32_t lkey, uint64_t wr_id) {
  ibv_sge s{addr, len, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = qpn;
  wr.wr.ud.remote_qkey = qkey;
  ibv_send_wr* bad;
  return ibv_post_send(qp, &wr, &bad);
}

int VerbsTest::post_atomic(ibv_qp* qp, ibv_wr_opcode op, Buffer& result, uint64_t raddr,
                           uint32_t rkey, uint64_t compare_add, uint64_t swap, uint64_t wr_id) {
  ibv_sge s{reinterpret_cast<uint64_t>(result.data), 8, result.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = raddr;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

void VerbsTest::write_and_check(ibv_qp* qp, Side& from, Side& to) {
  Buffer src = make_buffer(from, 4096, kFullAccess);
  Buffer dst = make_buffer(to, 4096, kFullAccess);
  fill_pattern(src.data, 4096, qp->qp_num);
  ibv_sge sge{reinterpret_cast<uint64_t>(src.data), 4096, src.mr->lkey};
  ASSERT_EQ(post_send(qp, IBV_WR_RDMA_WRITE, {sge}, 7, IBV_SEND_SIGNALED,
                      reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
            0);
  auto wc = wait_wc(from.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(memcmp(dst.data, src.data, 4096), 0);
  free_buffer(&src);
  free_buffer(&dst);
}

}  // namespace wharf::verify
