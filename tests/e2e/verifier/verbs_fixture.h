// Test fixture for verbs semantics: starts a private wharfd, opens two contexts (two router
// sessions, like two processes) and offers helpers to build connected QPs.
// The binary links Debian's libibverbs; CTest injects ours (LD_PRELOAD or LD_LIBRARY_PATH).
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace wharf::verify {

// A wharfd child process on a temporary socket; WHARF_ROUTER points at it.
class RouterProcess {
 public:
  explicit RouterProcess(const std::vector<std::string>& extra_args = {});
  ~RouterProcess();
  void kill_hard();  // SIGKILL, for crash tests
  // SIGKILL, then a new router with the same arguments on the same socket (issue #23).
  void restart();
  // wharfd --upgrade: the process executes its binary again, keeping its PID and socket;
  // returns once the new image answers.
  void upgrade();
  void pause();   // SIGSTOP: control requests wait for resume()
  void resume();  // SIGCONT
  std::string socket() const { return dir_ + "/wharfd.sock"; }

 private:
  void start();

  std::string dir_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

// Start addresses of this process's mappings of router memfds named `name` ("wharf-qp",
// "wharf-context").
std::set<uintptr_t> mappings_named(const char* name);

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
};

struct Buffer {
  uint8_t* data = nullptr;
  size_t len = 0;
  ibv_mr* mr = nullptr;
  bool owned = true;
};

// A receive of b's bytes [off, off + len), its one SGE in *sge.
ibv_recv_wr one_sge_recv(Buffer& b, size_t off, uint32_t len, uint64_t wr_id, ibv_sge* sge);

class VerbsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  void TearDown() override;

  Side open_side();
  // a_ on the router at socket `a`, b_ on the one at `b` (routers of a cluster: two hosts).
  void open_sides_on(const std::string& a, const std::string& b);
  void close_side(Side* s);
  // Page-aligned buffer of len bytes registered on side s with `access`.
  Buffer make_buffer(Side& s, size_t len, int access, size_t misalign = 0);
  void free_buffer(Buffer* b);

  ibv_qp* create_qp(Side& s, ibv_qp_type type, ibv_srq* srq = nullptr, uint32_t depth = 64,
                    uint32_t sges = 4, uint32_t inline_size = 256);
  // create_qp, and *region gets the start of this process's mapping of the QP's shared
  // region (docs/shm-rings.md; offsets below), found in /proc/self/maps.
  ibv_qp* create_qp_mapped(Side& s, ibv_qp_type type, uint8_t** region, ibv_srq* srq = nullptr);
  // XRC objects of side s (nullptr on failure): an XRC SRQ of domain x in s.pd completing on
  // s.cq, a target QP of x, and an initiator QP sending with completions on s.cq.
  static ibv_srq* create_xrc_srq(Side& s, ibv_xrcd* x);
  static ibv_qp* create_xrc_target(Side& s, ibv_xrcd* x);
  static ibv_qp* create_xrc_initiator(Side& s);
  // Posts a signaled work request of XRC initiator qp to the XRC SRQ numbered srqn: SEND,
  // WRITE or READ of sge at raddr/rkey, or FETCH_AND_ADD of `add` at raddr/rkey.
  static int post_xrc(ibv_qp* qp, ibv_wr_opcode op, ibv_sge sge, uint32_t srqn, uint64_t wr_id,
                      uint64_t raddr = 0, uint32_t rkey = 0, uint64_t add = 0);
  // An RC QP on side s whose send and receive completions go to cq (not s.cq).
  ibv_qp* create_rc_qp_on(Side& s, ibv_cq* cq, uint32_t depth = 64);
  // An RC QP of side s made by ibv_create_qp_ex with `send_ops` (IBV_QP_EX_WITH_*), connected
  // to a plain RC QP of side `peer` (both with full remote access); *remote gets that one.
  ibv_qp_ex* rc_pair_ex(Side& s, uint64_t send_ops, Side& peer, ibv_qp** remote);
  // Posts (ibv_wr_*) a signaled ATOMIC WRITE of `value` to raddr/rkey.
  static int post_atomic_write(ibv_qp_ex* qx, uint64_t value, uint64_t raddr, uint32_t rkey,
                               uint64_t wr_id);
  // A new RC QP on each side, connected to each other with full remote access.
  void connected_rc_pair(Side& xs, ibv_qp** x, Side& ys, ibv_qp** y);
  // Moves a connected QP (RC, UC, XRC initiator or target) to RTS connected to `remote` on
  // side `rs`.
  void connect(ibv_qp* qp, Side& ls, ibv_qp* remote, Side& rs, int access, uint8_t rnr_retry = 7,
               uint8_t retry_cnt = 7, uint8_t timeout = 14, uint8_t min_rnr_timer = 1);
  void to_rts_ud(ibv_qp* qp, uint32_t qkey);
  // A connected RC pair a<->b with full remote access.
  void rc_pair(ibv_qp** qa, ibv_qp** qb, ibv_qp_type type = IBV_QPT_RC);

  // Polls cq until n completions arrive (bounded: fails after `limit`).
  std::vector<ibv_wc> wait_wc(ibv_cq* cq, int n,
                              std::chrono::seconds limit = std::chrono::seconds(5));
  // The next completion of cq (a failure, and status IBV_WC_GENERAL_ERR, if none comes).
  ibv_wc wait_one(ibv_cq* cq, std::chrono::seconds limit = std::chrono::seconds(5));
  void post_recv(ibv_qp* qp, Buffer& b, size_t off, uint32_t len, uint64_t wr_id);
  // A basic SRQ of s (max_wr receives of one SGE), and one receive posted to it.
  static ibv_srq* create_srq(Side& s, uint32_t max_wr = 16);
  static void post_srq_recv(ibv_srq* srq, Buffer& b, size_t off, uint32_t len, uint64_t wr_id);
  int post_send(ibv_qp* qp, ibv_wr_opcode op, std::vector<ibv_sge> sges, uint64_t wr_id,
                int flags = IBV_SEND_SIGNALED, uint64_t raddr = 0, uint32_t rkey = 0);
  // Posts a signaled BIND_MW of type 2 window mw (new key rkey) over [addr, addr+len) of mr.
  static int post_bind(ibv_qp* qp, ibv_mw* mw, uint32_t rkey, ibv_mr* mr, uint64_t addr,
                       uint64_t len, unsigned int access, uint64_t wr_id);
  // Posts a signaled LOCAL_INV (no SGEs) or SEND_WITH_INV of `key`.
  static int post_invalidate(ibv_qp* qp, ibv_wr_opcode op, std::vector<ibv_sge> sges, uint32_t key,
                             uint64_t wr_id);
  // Posts a signaled UD send of [addr, addr+len) (lkey) to qpn/qkey through ah.
  static int post_ud(ibv_qp* qp, ibv_ah* ah, uint32_t qpn, uint32_t qkey, uint64_t addr,
                     uint32_t len, uint32_t lkey, uint64_t wr_id = 0);
  // A signaled atomic on the 8 bytes at raddr; the old value lands in result (8 bytes).
  int post_atomic(ibv_qp* qp, ibv_wr_opcode op, Buffer& result, uint64_t raddr, uint32_t rkey,
                  uint64_t compare_add, uint64_t swap = 0, uint64_t wr_id = 0);

  // Posts a signaled 4 KiB WRITE on qp from side `from` to side `to`, and checks that it
  // completes successfully and that the bytes landed.
  void write_and_check(ibv_qp* qp, Side& from, Side& to);

  static RouterProcess* router_;
  Side a_, b_;
};

// QP region layout (docs/shm-rings.md): SQ producer index at 0, consumer at 64, RQ ring
// header at 128, direct-path line at 256, counters at 320 (tx_msgs, tx_bytes, rx_msgs,
// rx_bytes, errors, express_msgs: 8 bytes each; then by opcode and by status), rdma_cm
// transitions at 704, local completions at 1728, SQ slots at 1984.
constexpr size_t kQpCountersOffset = 320;
constexpr size_t kSqSlotsOffset = 1984;

constexpr int kFullAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

void fill_pattern(uint8_t* p, size_t n, uint32_t seed);

}  // namespace wharf::verify
