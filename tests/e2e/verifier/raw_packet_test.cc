// RAW_PACKET QPs, flow steering and RSS on an Ethernet port (router/flow_steering.cc,
// abi/verbs/flow_verbs.cc, abi/verbs/wq_verbs.cc): a frame goes to the QPs whose rules take it,
// and an RSS QP spreads what it takes over its table's WQs.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cluster.h"
#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

constexpr uint8_t kDstMac[6] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55};

// A UDP/IPv4 frame of `len` bytes to kDstMac, from src (dotted) to 10.0.0.2:dport.
std::vector<uint8_t> udp_frame(const char* src, uint16_t dport, size_t len) {
  std::vector<uint8_t> f(len, 0xab);  // payload
  std::memset(f.data(), 0, 14 + 20 + 8);
  std::memcpy(f.data(), kDstMac, 6);
  const uint8_t src_mac[6] = {0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8};
  std::memcpy(f.data() + 6, src_mac, 6);
  f[12] = 0x08, f[13] = 0x00;
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45, ip[8] = 64, ip[9] = IPPROTO_UDP;
  inet_pton(AF_INET, src, ip + 12);
  inet_pton(AF_INET, "10.0.0.2", ip + 16);
  uint8_t* udp = ip + 20;
  udp[0] = 0x30, udp[1] = 0x39;  // source port 12345
  udp[2] = static_cast<uint8_t>(dport >> 8), udp[3] = static_cast<uint8_t>(dport);
  return f;
}

// An ibv_flow_attr followed by its specs, as ibv_create_flow takes it.
struct FlowRule {
  ibv_flow_attr attr{};
  ibv_flow_spec_eth eth{};
  ibv_flow_spec_ipv4 ip{};
  ibv_flow_spec_tcp_udp udp{};
};

// A rule on kDstMac, IPv4, and UDP destination port `dport` (0: any port, eth spec only).
FlowRule udp_rule(uint16_t dport) {
  FlowRule r;
  r.attr.type = IBV_FLOW_ATTR_NORMAL;
  r.attr.port = 1;
  r.attr.size = sizeof(r);
  r.attr.num_of_specs = dport == 0 ? 1 : 3;
  r.eth.type = IBV_FLOW_SPEC_ETH;
  r.eth.size = sizeof(r.eth);
  std::memcpy(r.eth.val.dst_mac, kDstMac, 6);
  std::memset(r.eth.mask.dst_mac, 0xff, 6);
  r.ip.type = IBV_FLOW_SPEC_IPV4;
  r.ip.size = sizeof(r.ip);
  r.udp.type = IBV_FLOW_SPEC_UDP;
  r.udp.size = sizeof(r.udp);
  r.udp.val.dst_port = htons(dport);
  r.udp.mask.dst_port = 0xffff;
  return r;
}

class RawPacketTest : public VerbsTest {
 protected:
  static void SetUpTestSuite() { router_ = new RouterProcess({"--link-layer", "eth"}); }

  // A RAW_PACKET QP of side s in RTS, with `recvs` 256-byte receives posted into buf.
  ibv_qp* raw_qp(Side& s, Buffer& buf, int recvs) {
    ibv_qp* qp = create_qp(s, IBV_QPT_RAW_PACKET);
    if (qp == nullptr) return nullptr;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT), 0);
    a.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
    for (int i = 0; i < recvs; ++i) post_recv(qp, buf, static_cast<size_t>(i) * 256, 256, i);
    return qp;
  }
  int send_frame(ibv_qp* qp, Buffer& src, const std::vector<uint8_t>& frame, uint64_t wr_id) {
    std::memcpy(src.data, frame.data(), frame.size());
    return post_send(
        qp, IBV_WR_SEND,
        {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(frame.size()), src.mr->lkey}},
        wr_id);
  }
};

TEST_F(RawPacketTest, AFrameGoesOnlyToTheQpsWhoseRulesTakeIt) {
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer got = make_buffer(b_, 8192, kFullAccess);
  ibv_cq* other_cq = ibv_create_cq(b_.ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(other_cq, nullptr);
  ibv_qp* sender = raw_qp(a_, src, 0);
  ibv_qp* taker = raw_qp(b_, got, 8);
  ibv_qp* bystander = create_rc_qp_on(b_, other_cq);  // not raw: never sees a frame
  ASSERT_NE(sender, nullptr);
  ASSERT_NE(taker, nullptr);
  ASSERT_NE(bystander, nullptr);
  FlowRule r = udp_rule(5678);
  ibv_flow* flow = ibv_create_flow(taker, &r.attr);
  ASSERT_NE(flow, nullptr) << strerror(errno);

  auto frame = udp_frame("10.0.0.1", 5678, 200);
  ASSERT_EQ(send_frame(sender, src, frame, 1), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  ibv_wc wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 200u);
  EXPECT_EQ(wc.wc_flags & IBV_WC_GRH, 0u);
  EXPECT_EQ(memcmp(got.data, frame.data(), frame.size()), 0);  // the frame, from byte 0

  // Another port: no rule takes it; the sender still completes (a wire takes any frame).
  ASSERT_EQ(send_frame(sender, src, udp_frame("10.0.0.1", 9999, 200), 2), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  ibv_wc none;
  EXPECT_EQ(ibv_poll_cq(b_.cq, 1, &none), 0);

  // A QP with a rule may not go; without it, it may.
  EXPECT_EQ(ibv_destroy_qp(taker), EBUSY);
  EXPECT_EQ(ibv_destroy_flow(flow), 0);
  EXPECT_EQ(ibv_destroy_qp(taker), 0);
  EXPECT_EQ(ibv_destroy_qp(bystander), 0);
  EXPECT_EQ(ibv_destroy_cq(other_cq), 0);
}

TEST_F(RawPacketTest, BadRulesAndFramesAreRefused) {
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  ibv_qp* qp = raw_qp(a_, src, 0);
  ASSERT_NE(qp, nullptr);
  FlowRule r = udp_rule(5678);
  r.attr.port = 2;
  errno = 0;
  EXPECT_EQ(ibv_create_flow(qp, &r.attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  r = udp_rule(5678);
  r.attr.flags = IBV_FLOW_ATTR_FLAGS_EGRESS;
  errno = 0;
  EXPECT_EQ(ibv_create_flow(qp, &r.attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  r = udp_rule(5678);
  r.ip.size = 3;
  errno = 0;
  EXPECT_EQ(ibv_create_flow(qp, &r.attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A rule on an RC QP: not a RAW_PACKET QP.
  ibv_qp* rc = create_qp(a_, IBV_QPT_RC);
  r = udp_rule(5678);
  errno = 0;
  EXPECT_EQ(ibv_create_flow(rc, &r.attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A frame shorter than an Ethernet header is a local length error.
  ASSERT_EQ(send_frame(qp, src, std::vector<uint8_t>(10, 0), 7), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_LOC_LEN_ERR);
}

TEST_F(RawPacketTest, AnRssQpSpreadsFramesOverItsWqsByTheirAddresses) {
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer got = make_buffer(b_, 64 * 256, kFullAccess);
  ibv_qp* sender = raw_qp(a_, src, 0);
  ASSERT_NE(sender, nullptr);
  ibv_cq* cqs[2] = {ibv_create_cq(b_.ctx, 64, nullptr, nullptr, 0),
                    ibv_create_cq(b_.ctx, 64, nullptr, nullptr, 0)};
  ASSERT_NE(cqs[0], nullptr);
  ASSERT_NE(cqs[1], nullptr);
  constexpr int kWqs = 4, kPerWq = 16;
  ibv_wq* wqs[kWqs];
  for (int i = 0; i < kWqs; ++i) {
    ibv_wq_init_attr wa{};
    wa.wq_type = IBV_WQT_RQ;
    wa.max_wr = kPerWq;
    wa.max_sge = 1;
    wa.pd = b_.pd;
    wa.cq = cqs[i % 2];
    wqs[i] = ibv_create_wq(b_.ctx, &wa);
    ASSERT_NE(wqs[i], nullptr) << strerror(errno);
    ibv_wq_attr ma{};
    ma.attr_mask = IBV_WQ_ATTR_STATE;
    ma.wq_state = IBV_WQS_RDY;
    ASSERT_EQ(ibv_modify_wq(wqs[i], &ma), 0);
    for (int k = 0; k < kPerWq; ++k) {
      ibv_sge s{reinterpret_cast<uint64_t>(got.data + (i * kPerWq + k) * 256), 256, got.mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = static_cast<uint64_t>(i);  // which WQ took it
      wr.sg_list = &s;
      wr.num_sge = 1;
      ibv_recv_wr* bad;
      ASSERT_EQ(ibv_post_wq_recv(wqs[i], &wr, &bad), 0);
    }
  }
  ibv_rwq_ind_table_init_attr ta{};
  ta.log_ind_tbl_size = 2;
  ta.ind_tbl = wqs;
  ibv_rwq_ind_table* table = ibv_create_rwq_ind_table(b_.ctx, &ta);
  ASSERT_NE(table, nullptr);
  uint8_t key[40];
  for (int i = 0; i < 40; ++i) key[i] = static_cast<uint8_t>(0x6d + 13 * i);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_RAW_PACKET;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  qa.pd = b_.pd;
  qa.rwq_ind_tbl = table;
  qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  qa.rx_hash_conf.rx_hash_key_len = 40;
  qa.rx_hash_conf.rx_hash_key = key;
  qa.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
  ibv_qp* rss = ibv_create_qp_ex(b_.ctx, &qa);
  ASSERT_NE(rss, nullptr) << strerror(errno);
  FlowRule r = udp_rule(0);
  ibv_flow* flow = ibv_create_flow(rss, &r.attr);
  ASSERT_NE(flow, nullptr) << strerror(errno);

  constexpr int kFrames = 32;
  for (int i = 0; i < kFrames; ++i) {
    const std::string from = "10.1." + std::to_string(i) + "." + std::to_string(3 * i + 1);
    ASSERT_EQ(send_frame(sender, src, udp_frame(from.c_str(), 5678, 128), i), 0);
    EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  }
  std::set<uint64_t> used;
  int received = 0;
  for (int spins = 0; received < kFrames && spins < 5000000; ++spins) {
    for (ibv_cq* cq : cqs) {
      ibv_wc wc;
      if (ibv_poll_cq(cq, 1, &wc) != 1) continue;
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
      EXPECT_EQ(wc.byte_len, 128u);
      used.insert(wc.wr_id);
      ++received;
    }
  }
  EXPECT_EQ(received, kFrames);
  EXPECT_GE(used.size(), 2u) << "32 sources all hashed to one WQ";
  // A WQ in the table, or a table an RSS QP uses, cannot go.
  EXPECT_EQ(ibv_destroy_wq(wqs[0]), EBUSY);
  EXPECT_EQ(ibv_destroy_rwq_ind_table(table), EBUSY);
  EXPECT_EQ(ibv_destroy_flow(flow), 0);
  EXPECT_EQ(ibv_destroy_qp(rss), 0);
  EXPECT_EQ(ibv_destroy_rwq_ind_table(table), 0);
  for (ibv_wq* wq : wqs) EXPECT_EQ(ibv_destroy_wq(wq), 0);
}

// Between hosts: two Ethernet routers of a cluster. A frame crosses to the other host's
// RAW_PACKET QPs whose rules take it, and to nobody else there.
class RawPacketCrossHostTest : public TwoHostSides<RawPacketTest> {
 protected:
  static void SetUpTestSuite() { cluster_ = new Cluster(2, {"--link-layer", "eth"}); }
};

TEST_F(RawPacketCrossHostTest, AFrameReachesTheQpsOfAnotherHostWhoseRulesTakeIt) {
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer got = make_buffer(b_, 8192, kFullAccess);
  ibv_qp* sender = raw_qp(a_, src, 0);
  ibv_qp* taker = raw_qp(b_, got, 8);
  ASSERT_NE(sender, nullptr);
  ASSERT_NE(taker, nullptr);
  FlowRule r = udp_rule(5678);
  ibv_flow* flow = ibv_create_flow(taker, &r.attr);
  ASSERT_NE(flow, nullptr) << strerror(errno);
  const auto frame = udp_frame("10.0.0.1", 5678, 250);  // raw_qp posts 256-byte receives
  ASSERT_EQ(send_frame(sender, src, frame, 1), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  ibv_wc wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 250u);
  EXPECT_EQ(memcmp(got.data, frame.data(), frame.size()), 0);
  // A port no rule there takes: nothing arrives (the next frame that does is the one seen).
  ASSERT_EQ(send_frame(sender, src, udp_frame("10.0.0.1", 9999, 200), 2), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  ASSERT_EQ(send_frame(sender, src, udp_frame("10.0.0.3", 5678, 180), 3), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  wc = wait_one(b_.cq);
  EXPECT_EQ(wc.byte_len, 180u);
  EXPECT_EQ(ibv_destroy_flow(flow), 0);
  EXPECT_EQ(ibv_destroy_qp(taker), 0);
  EXPECT_EQ(ibv_destroy_qp(sender), 0);
}

// On an InfiniBand port there are no Ethernet frames to send.
TEST_F(VerbsTest, RawPacketQpsNeedAnEthernetPort) {
  ibv_qp_init_attr init{};
  init.send_cq = a_.cq;
  init.recv_cq = a_.cq;
  init.qp_type = IBV_QPT_RAW_PACKET;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a_.pd, &init), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

}  // namespace
}  // namespace wharf::verify
