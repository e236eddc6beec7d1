// XRC: domains (private and shared through a file), XRC SRQs, initiator and target QPs. An
// initiator's message goes to the XRC SRQ it names, which must be in its target's domain; the
// SRQ's PD protects RDMA and its CQ gets the receive completions.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class XrcTest : public VerbsTest {
 protected:
  void TearDown() override {
    for (ibv_qp* qp : qps_) ibv_destroy_qp(qp);
    for (ibv_srq* srq : srqs_) ibv_destroy_srq(srq);
    for (ibv_xrcd* x : xrcds_) ibv_close_xrcd(x);
    for (const std::string& f : files_) unlink(f.c_str());
    VerbsTest::TearDown();
  }

  // A domain of side s: named by file `path` when given, else private.
  ibv_xrcd* open_xrcd(Side& s, const std::string& path = "", int oflags = O_CREAT) {
    ibv_xrcd_init_attr attr{};
    attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    attr.fd = -1;
    attr.oflags = oflags;
    int fd = -1;
    if (!path.empty()) {
      fd = open(path.c_str(), O_RDONLY | O_CREAT, 0600);
      attr.fd = fd;
    }
    ibv_xrcd* x = ibv_open_xrcd(s.ctx, &attr);
    if (fd >= 0) close(fd);
    if (x != nullptr) xrcds_.push_back(x);
    return x;
  }
  std::string temp_file() {
    char name[] = "/tmp/wharf-xrcd-XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    files_.emplace_back(name);
    return name;
  }
  ibv_srq* xrc_srq(Side& s, ibv_xrcd* x) {
    ibv_srq* srq = create_xrc_srq(s, x);
    if (srq != nullptr) srqs_.push_back(srq);
    return srq;
  }
  ibv_qp* target(Side& s, ibv_xrcd* x) {
    ibv_qp* qp = create_xrc_target(s, x);
    if (qp != nullptr) qps_.push_back(qp);
    return qp;
  }
  ibv_qp* initiator(Side& s) {
    ibv_qp* qp = create_xrc_initiator(s);
    if (qp != nullptr) qps_.push_back(qp);
    return qp;
  }
  // Initiator on a_ connected to a target in domain x of b_.
  void xrc_pair(ibv_xrcd* x, ibv_qp** ini, ibv_qp** tgt) {
    *ini = initiator(a_);
    *tgt = target(b_, x);
    ASSERT_NE(*ini, nullptr) << strerror(errno);
    ASSERT_NE(*tgt, nullptr) << strerror(errno);
    connect(*ini, a_, *tgt, b_, 0);
    connect(*tgt, b_, *ini, a_, kFullAccess);
  }
  static uint32_t srq_num(ibv_srq* srq) {
    uint32_t n = 0;
    EXPECT_EQ(ibv_get_srq_num(srq, &n), 0);
    return n;
  }
  static void post_srq_recv(ibv_srq* srq, Buffer& b, uint32_t len, uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uint64_t>(b.data), len, b.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  }

  std::vector<ibv_qp*> qps_;
  std::vector<ibv_srq*> srqs_;
  std::vector<ibv_xrcd*> xrcds_;
  std::vector<std::string> files_;
};

TEST_F(XrcTest, ASendLandsInTheSrqItNamesAndCompletesOnThatSrqsCq) {
  ibv_xrcd* x = open_xrcd(b_);
  ASSERT_NE(x, nullptr) << strerror(errno);
  ibv_srq* srq = xrc_srq(b_, x);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  ibv_qp *ini = nullptr, *tgt = nullptr;
  xrc_pair(x, &ini, &tgt);
  Buffer src = make_buffer(a_, 4096, IBV_ACCESS_LOCAL_WRITE);
  Buffer dst = make_buffer(b_, 4096, IBV_ACCESS_LOCAL_WRITE);
  fill_pattern(src.data, 512, 3);
  post_srq_recv(srq, dst, 4096, 77);
  ASSERT_EQ(post_xrc(ini, IBV_WR_SEND, {reinterpret_cast<uint64_t>(src.data), 512, src.mr->lkey},
                     srq_num(srq), 1),
            0);
  const ibv_wc sent = wait_one(a_.cq);
  EXPECT_EQ(sent.status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent.opcode, IBV_WC_SEND);
  const ibv_wc got = wait_one(b_.cq);
  EXPECT_EQ(got.status, IBV_WC_SUCCESS);
  EXPECT_EQ(got.wr_id, 77u);
  EXPECT_EQ(got.byte_len, 512u);
  EXPECT_EQ(got.qp_num, tgt->qp_num);  // the target it arrived through
  EXPECT_EQ(got.src_qp, ini->qp_num);
  EXPECT_EQ(std::memcmp(src.data, dst.data, 512), 0);
}

TEST_F(XrcTest, RdmaAndAtomicsUseTheNamedSrqsProtectionDomain) {
  ibv_xrcd* x = open_xrcd(b_);
  ASSERT_NE(x, nullptr);
  ibv_srq* srq = xrc_srq(b_, x);
  ASSERT_NE(srq, nullptr);
  ibv_qp *ini = nullptr, *tgt = nullptr;
  xrc_pair(x, &ini, &tgt);
  Buffer src = make_buffer(a_, 4096, IBV_ACCESS_LOCAL_WRITE);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  fill_pattern(src.data, 4096, 5);
  const auto raddr = reinterpret_cast<uint64_t>(dst.data);
  const ibv_sge sge{reinterpret_cast<uint64_t>(src.data), 256, src.mr->lkey};
  ASSERT_EQ(post_xrc(ini, IBV_WR_RDMA_WRITE, sge, srq_num(srq), 1, raddr, dst.mr->rkey), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(src.data, dst.data, 256), 0);
  // A fetch-and-add: the old value comes back, the new one stays.
  Buffer result = make_buffer(a_, 4096, IBV_ACCESS_LOCAL_WRITE);
  const uint64_t before = 40;
  std::memcpy(dst.data + 512, &before, 8);
  ibv_sge rsge{reinterpret_cast<uint64_t>(result.data), 8, result.mr->lkey};
  ASSERT_EQ(post_xrc(ini, IBV_WR_ATOMIC_FETCH_AND_ADD, rsge, srq_num(srq), 3, raddr + 512,
                     dst.mr->rkey, 2),
            0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  uint64_t old_value = 0, new_value = 0;
  std::memcpy(&old_value, result.data, 8);
  std::memcpy(&new_value, dst.data + 512, 8);
  EXPECT_EQ(old_value, 40u);
  EXPECT_EQ(new_value, 42u);
  // A key of a PD other than the SRQ's is refused: an SRQ of a second PD in the same domain.
  ibv_pd* other = ibv_alloc_pd(b_.ctx);
  ASSERT_NE(other, nullptr);
  ibv_srq_init_attr_ex attr{};
  attr.attr.max_wr = 4;
  attr.attr.max_sge = 1;
  attr.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  attr.srq_type = IBV_SRQT_XRC;
  attr.pd = other;
  attr.xrcd = x;
  attr.cq = b_.cq;
  ibv_srq* other_srq = ibv_create_srq_ex(b_.ctx, &attr);
  ASSERT_NE(other_srq, nullptr);
  ASSERT_EQ(post_xrc(ini, IBV_WR_RDMA_WRITE, sge, srq_num(other_srq), 2, raddr, dst.mr->rkey), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_REM_ACCESS_ERR);
  ibv_destroy_srq(other_srq);
  ibv_dealloc_pd(other);
}

TEST_F(XrcTest, AnSrqOutsideTheTargetsDomainIsAnInvalidRequest) {
  ibv_xrcd* x = open_xrcd(b_);
  ibv_xrcd* elsewhere = open_xrcd(b_);
  ASSERT_NE(x, nullptr);
  ASSERT_NE(elsewhere, nullptr);
  ibv_srq* foreign = xrc_srq(b_, elsewhere);
  ASSERT_NE(foreign, nullptr);
  ibv_srq_init_attr basic_attr{};
  basic_attr.attr.max_wr = 4;
  basic_attr.attr.max_sge = 1;
  ibv_srq* basic = ibv_create_srq(b_.pd, &basic_attr);
  ASSERT_NE(basic, nullptr);
  srqs_.push_back(basic);
  ibv_qp *ini = nullptr, *tgt = nullptr;
  xrc_pair(x, &ini, &tgt);
  Buffer src = make_buffer(a_, 4096, IBV_ACCESS_LOCAL_WRITE);
  Buffer dst = make_buffer(b_, 4096, IBV_ACCESS_LOCAL_WRITE);
  post_srq_recv(foreign, dst, 4096, 1);
  const ibv_sge sge{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey};
  ASSERT_EQ(post_xrc(ini, IBV_WR_SEND, sge, srq_num(foreign), 1), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_REM_INV_REQ_ERR);
  // Nothing reached the foreign SRQ.
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(b_.cq, 1, &wc), 0);
  // A basic SRQ is no XRC SRQ of any domain either.
  ibv_qp *ini2 = nullptr, *tgt2 = nullptr;
  xrc_pair(x, &ini2, &tgt2);
  ASSERT_EQ(post_xrc(ini2, IBV_WR_SEND, sge, srq_num(basic), 2), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(XrcTest, ContextsOpeningOneFileShareItsDomain) {
  const std::string file = temp_file();
  ibv_xrcd* xa = open_xrcd(a_, file);
  ASSERT_NE(xa, nullptr) << strerror(errno);
  ibv_xrcd* xb = open_xrcd(b_, file, 0);  // exists: no O_CREAT needed
  ASSERT_NE(xb, nullptr) << strerror(errno);
  // O_EXCL on an existing domain, and no O_CREAT for a file that names none, fail.
  EXPECT_EQ(open_xrcd(b_, file, O_CREAT | O_EXCL), nullptr);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(open_xrcd(b_, temp_file(), 0), nullptr);
  EXPECT_EQ(errno, ENOENT);
  // A target of a_'s handle is served by an SRQ made through b_'s.
  ibv_srq* srq = xrc_srq(b_, xb);
  ASSERT_NE(srq, nullptr);
  ibv_qp* ini = initiator(b_);
  ibv_qp* tgt = target(a_, xa);
  ASSERT_NE(ini, nullptr);
  ASSERT_NE(tgt, nullptr);
  connect(ini, b_, tgt, a_, 0);
  connect(tgt, a_, ini, b_, kFullAccess);
  Buffer src = make_buffer(b_, 4096, IBV_ACCESS_LOCAL_WRITE);
  Buffer dst = make_buffer(b_, 4096, IBV_ACCESS_LOCAL_WRITE);
  fill_pattern(src.data, 100, 9);
  post_srq_recv(srq, dst, 4096, 5);
  ASSERT_EQ(post_xrc(ini, IBV_WR_SEND, {reinterpret_cast<uint64_t>(src.data), 100, src.mr->lkey},
                     srq_num(srq), 1),
            0);
  const auto wcs = wait_wc(b_.cq, 2);  // the send's and the receive's
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(src.data, dst.data, 100), 0);
}

TEST_F(XrcTest, ADomainInUseCannotCloseAndXrcQpsHaveNoReceiveQueue) {
  ibv_xrcd* x = open_xrcd(b_);
  ASSERT_NE(x, nullptr);
  ibv_qp* tgt = target(b_, x);
  ASSERT_NE(tgt, nullptr);
  EXPECT_EQ(ibv_close_xrcd(x), EBUSY);
  ibv_qp* ini = initiator(a_);
  ASSERT_NE(ini, nullptr);
  Buffer b = make_buffer(a_, 4096, IBV_ACCESS_LOCAL_WRITE);
  ibv_sge sge{reinterpret_cast<uint64_t>(b.data), 64, b.mr->lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(ini, &wr, &bad), EINVAL);
  EXPECT_EQ(ibv_post_recv(tgt, &wr, &bad), EINVAL);
  // Bad arguments: a target without a domain, an XRC SRQ without a CQ.
  ibv_qp_init_attr_ex qattr{};
  qattr.qp_type = IBV_QPT_XRC_RECV;
  qattr.comp_mask = IBV_QP_INIT_ATTR_PD;
  qattr.pd = b_.pd;
  EXPECT_EQ(ibv_create_qp_ex(b_.ctx, &qattr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_srq_init_attr_ex sattr{};
  sattr.attr.max_wr = 4;
  sattr.attr.max_sge = 1;
  sattr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD;
  sattr.srq_type = IBV_SRQT_XRC;
  sattr.pd = b_.pd;
  sattr.xrcd = x;
  EXPECT_EQ(ibv_create_srq_ex(b_.ctx, &sattr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(ibv_destroy_qp(tgt), 0);
  qps_.erase(std::find(qps_.begin(), qps_.end(), tgt));
  EXPECT_EQ(ibv_close_xrcd(x), 0);
  xrcds_.clear();
}

TEST_F(XrcTest, AContextOfTheDomainOpensAnothersTargetAndDropsOnlyItsHandle) {
  const std::string file = temp_file();
  ibv_xrcd* xb = open_xrcd(b_, file);
  ibv_xrcd* xa = open_xrcd(a_, file, 0);
  ibv_xrcd* private_domain = open_xrcd(a_);
  ASSERT_NE(xb, nullptr);
  ASSERT_NE(xa, nullptr);
  ASSERT_NE(private_domain, nullptr);
  ibv_qp* tgt = target(b_, xb);
  ASSERT_NE(tgt, nullptr);
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = tgt->qp_num;
  oa.qp_type = IBV_QPT_XRC_RECV;
  oa.xrcd = private_domain;  // not the target's domain
  EXPECT_EQ(ibv_open_qp(a_.ctx, &oa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  oa.xrcd = xa;
  ibv_qp* opened = ibv_open_qp(a_.ctx, &oa);
  ASSERT_NE(opened, nullptr) << strerror(errno);
  EXPECT_EQ(opened->qp_num, tgt->qp_num);
  // Both handles move and see the one QP.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(ibv_modify_qp(opened, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(tgt, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(attr.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_WRITE));
  // Nothing can be posted through it; an initiator (not a target) cannot be opened.
  ibv_recv_wr rwr{};
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_recv(opened, &rwr, &rbad), EINVAL);
  ibv_qp* ini = initiator(b_);
  ASSERT_NE(ini, nullptr);
  oa.qp_num = ini->qp_num;
  EXPECT_EQ(ibv_open_qp(a_.ctx, &oa), nullptr);
  // Destroying the opened handle leaves the target; its domain is held until then.
  EXPECT_EQ(ibv_destroy_qp(opened), 0);
  ASSERT_EQ(ibv_query_qp(tgt, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_INIT);
  // Once its creator destroys the target, a handle opened to it names nothing.
  oa.qp_num = tgt->qp_num;
  opened = ibv_open_qp(a_.ctx, &oa);
  ASSERT_NE(opened, nullptr);
  ASSERT_EQ(ibv_destroy_qp(tgt), 0);
  qps_.erase(std::find(qps_.begin(), qps_.end(), tgt));
  EXPECT_EQ(ibv_query_qp(opened, &attr, IBV_QP_STATE, &init), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(opened), 0);
}

}  // namespace
}  // namespace wharf::verify
