// UD multicast: a datagram sent to a group reaches each attached QP once (with the Q_Key
// check of any UD datagram), nobody else, and nobody after it detached; attach checks the QP
// type and the group's address; across hosts the group is reached through every router.
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

constexpr uint16_t kMlid = 0xc123;
constexpr uint32_t kQkey = 0x1234;
constexpr uint32_t kMulticastQpn = 0xffffff;

ibv_gid group_gid() {
  ibv_gid g{};
  g.raw[0] = 0xff;
  g.raw[1] = 0x12;
  g.raw[15] = 0x42;
  return g;
}

class MulticastTest : public VerbsTest {
 protected:
  // An address handle of side s for the group (GRH with the MGID, and its MLID).
  static ibv_ah* group_ah(Side& s) {
    ibv_ah_attr a{};
    a.dlid = kMlid;
    a.port_num = 1;
    a.is_global = 1;
    a.grh.dgid = group_gid();
    a.grh.hop_limit = 64;
    return ibv_create_ah(s.pd, &a);
  }
  // Sends `len` bytes of src to the group from qp; waits for the send's completion (by then
  // the router of this host has delivered every local copy).
  void send_to_group(ibv_qp* qp, Side& from, ibv_ah* ah, Buffer& src, uint32_t len,
                     uint32_t qkey = kQkey) {
    ASSERT_EQ(post_ud(qp, ah, kMulticastQpn, qkey, reinterpret_cast<uint64_t>(src.data), len,
                      src.mr->lkey),
              0);
    EXPECT_EQ(wait_one(from.cq).status, IBV_WC_SUCCESS);
  }
  static int drain(ibv_cq* cq, std::vector<ibv_wc>* out) {
    ibv_wc wc[16];
    int n, total = 0;
    while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
      out->insert(out->end(), wc, wc + n);
      total += n;
    }
    return total;
  }
};

TEST_F(MulticastTest, EveryMemberGetsOneCopyAndNobodyElseDoes) {
  ibv_qp* sender = create_qp(a_, IBV_QPT_UD);
  ibv_qp* m1 = create_qp(b_, IBV_QPT_UD);
  ibv_qp* m2 = create_qp(b_, IBV_QPT_UD);
  ibv_qp* other = create_qp(b_, IBV_QPT_UD);
  ibv_qp* wrong_qkey = create_qp(b_, IBV_QPT_UD);
  for (ibv_qp* q : {sender, m1, m2, other}) to_rts_ud(q, kQkey);
  to_rts_ud(wrong_qkey, kQkey + 1);
  const ibv_gid g = group_gid();
  ASSERT_EQ(ibv_attach_mcast(m1, &g, kMlid), 0);
  ASSERT_EQ(ibv_attach_mcast(m1, &g, kMlid), 0);  // again: still one membership
  ASSERT_EQ(ibv_attach_mcast(m2, &g, kMlid), 0);
  ASSERT_EQ(ibv_attach_mcast(wrong_qkey, &g, kMlid), 0);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 16 * 1024, kFullAccess);
  std::memset(src.data, 0x6d, 256);
  uint64_t id = 0;
  for (ibv_qp* q : {m1, m2, other, wrong_qkey}) {
    post_recv(q, dst, id * 4096, 4096, id);
    ++id;
  }
  ibv_ah* ah = group_ah(a_);
  ASSERT_NE(ah, nullptr);
  send_to_group(sender, a_, ah, src, 256);
  std::vector<ibv_wc> got;
  ASSERT_EQ(drain(b_.cq, &got), 2);
  for (const ibv_wc& wc : got) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_TRUE(wc.qp_num == m1->qp_num || wc.qp_num == m2->qp_num);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
    EXPECT_EQ(wc.byte_len, 256u + 40);
    EXPECT_EQ(wc.src_qp, sender->qp_num);
  }
  EXPECT_NE(got[0].qp_num, got[1].qp_num);
  EXPECT_EQ(dst.data[40], 0x6d);
  // The GRH names the group.
  EXPECT_EQ(std::memcmp(dst.data + 24, g.raw, 16), 0);
  // After detaching m1, only m2 gets the next one.
  ASSERT_EQ(ibv_detach_mcast(m1, &g, kMlid), 0);
  EXPECT_EQ(ibv_detach_mcast(m1, &g, kMlid), EINVAL);
  post_recv(m1, dst, 8 * 1024, 4096, 10);
  post_recv(m2, dst, 12 * 1024, 4096, 11);
  send_to_group(sender, a_, ah, src, 64);
  got.clear();
  ASSERT_EQ(drain(b_.cq, &got), 1);
  EXPECT_EQ(got[0].qp_num, m2->qp_num);
  ibv_destroy_ah(ah);
}

TEST_F(MulticastTest, AttachChecksTheQpAndTheGroup) {
  ibv_qp* ud = create_qp(a_, IBV_QPT_UD);
  ibv_qp* rc = create_qp(a_, IBV_QPT_RC);
  const ibv_gid g = group_gid();
  ibv_gid unicast{};
  unicast.raw[15] = 1;
  EXPECT_EQ(ibv_attach_mcast(rc, &g, kMlid), EINVAL);
  EXPECT_EQ(ibv_attach_mcast(ud, &unicast, kMlid), EINVAL);
  if (a_.port.link_layer != IBV_LINK_LAYER_ETHERNET) {
    EXPECT_EQ(ibv_attach_mcast(ud, &g, 0x10), EINVAL);    // not a multicast LID
    EXPECT_EQ(ibv_attach_mcast(ud, &g, 0xffff), EINVAL);  // the permissive LID
  }
  EXPECT_EQ(ibv_attach_mcast(ud, &g, kMlid), 0);
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(a_.ctx, &attr), 0);
  EXPECT_GT(attr.max_mcast_grp, 0);
  EXPECT_GT(attr.max_mcast_qp_attach, 0);
}

}  // namespace
}  // namespace wharf::verify
