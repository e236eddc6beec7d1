// What a router answers to requests no real requester sends, from a peer router the test
// plays itself (fake_peer.h): the invalid-request NAKs of IBTA 9.7.5.2.5 and 9.9.3, and that
// nothing is placed meanwhile.
#include "fake_peer.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cluster.h"
#include "proto/router_dump.h"
#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

namespace host = proto::host;

constexpr uint32_t kPeerQpn = 0x4242;
constexpr uint16_t kPeerLid = 1025;  // host b's first LID
constexpr std::array<uint8_t, 128> kPayload = [] {
  std::array<uint8_t, 128> a{};
  a.fill(0x5a);
  return a;
}();

class FakePeerTest : public VerbsTest {
 protected:
  // Host a's router only: the test is host b.
  static void SetUpTestSuite() { cluster_ = new Cluster(2, {}, 1); }
  static void TearDownTestSuite() {
    delete peer_;
    peer_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    setenv("WHARF_ROUTER", cluster_->a().socket().c_str(), 1);
    a_ = open_side();
    // One peer for the suite: the router announces its networks to a host once.
    if (peer_ == nullptr) {
      peer_ = new FakePeer(cluster_->port(1), cluster_->port(0));
      ASSERT_TRUE(peer_->connect()) << "the router did not take us as host b";
    }
  }

  // An RC QP of a_ connected to the peer's QP kPeerQpn on host b, expecting PSN 0.
  ibv_qp* connected_qp() {
    ibv_qp* qp = create_qp(a_, IBV_QPT_RC);
    EXPECT_NE(qp, nullptr);
    ibv_qp remote{};
    remote.qp_num = kPeerQpn;
    Side b;
    b.port.lid = kPeerLid;
    connect(qp, a_, &remote, b, kFullAccess);
    return qp;
  }
  // A request (or, for the requester tests, a response) from the peer's QP to qp.
  host::Packet request(const ibv_qp* qp, host::Operation op, uint32_t psn, const uint8_t* payload,
                       uint32_t len) const {
    host::Packet p;
    p.hdr.opcode = host::opcode_of(host::kRc, op);
    p.hdr.dlid = a_.port.lid;
    p.hdr.slid = kPeerLid;
    p.hdr.dest_qpn = qp->qp_num;
    p.hdr.src_qpn = kPeerQpn;
    p.hdr.psn = psn;
    p.hdr.network = peer_->network();
    p.payload = payload;
    p.payload_len = len;
    return p;
  }
  // The router's next answer from qp (an earlier test's QP may have left some) is a NAK with
  // `code` for `psn`.
  static void expect_nak(const ibv_qp* qp, host::NakCode code, uint32_t psn) {
    host::Packet answer;
    do {
      ASSERT_TRUE(peer_->receive(&answer)) << "no answer";
    } while (answer.hdr.src_qpn != qp->qp_num);
    EXPECT_EQ(answer.hdr.opcode, host::opcode_of(host::kRc, host::kAcknowledge));
    EXPECT_EQ(answer.hdr.dest_qpn, kPeerQpn);
    EXPECT_EQ(answer.hdr.psn, psn);
    EXPECT_EQ(answer.aeth.syndrome, host::aeth_nak(code));
  }
  // The router's next answer from qp is an ACK of `psn` (an atomic ACK with the value the
  // atomic found when `atomic_orig` is given).
  static void expect_ack(const ibv_qp* qp, uint32_t psn, const uint64_t* atomic_orig = nullptr) {
    host::Packet answer;
    do {
      ASSERT_TRUE(peer_->receive(&answer)) << "no answer";
    } while (answer.hdr.src_qpn != qp->qp_num);
    EXPECT_EQ(answer.hdr.opcode,
              host::opcode_of(host::kRc, atomic_orig != nullptr ? host::kAtomicAcknowledge
                                                                : host::kAcknowledge));
    EXPECT_EQ(answer.hdr.psn, psn);
    EXPECT_EQ(answer.aeth.syndrome, host::aeth_ack());
    if (atomic_orig != nullptr) {
      EXPECT_EQ(answer.atomic_orig, *atomic_orig);
    }
  }
  // A SEND of the first `len` payload bytes that asks for an ACK.
  host::Packet acked_send(const ibv_qp* qp, uint32_t psn, uint32_t len) const {
    host::Packet p = request(qp, host::kSendOnly, psn, kPayload.data(), len);
    p.hdr.flags = host::kAckRequest;
    return p;
  }
  // Posts a signaled 64-byte SEND on qp, takes it from the wire and ACKs it; returns its PSN.
  uint32_t send_and_ack(ibv_qp* qp, Buffer& src) {
    EXPECT_EQ(
        post_send(qp, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 9),
        0);
    host::Packet sent;
    do {
      if (!peer_->receive(&sent)) {
        ADD_FAILURE() << "the SEND never came";
        return 0;
      }
    } while (sent.hdr.src_qpn != qp->qp_num);
    const uint32_t psn = sent.hdr.psn;
    host::Packet ack = request(qp, host::kAcknowledge, psn, nullptr, 0);
    ack.aeth.syndrome = host::aeth_ack();
    EXPECT_TRUE(peer_->send(ack));
    const ibv_wc wc = wait_one(a_.cq);
    EXPECT_EQ(wc.wr_id, 9u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    return psn;
  }
  // What the router says of qp's transport (`wharfctl resource show qp`'s "engine").
  static std::string engine_of(const ibv_qp* qp) {
    std::string dump, error;
    if (!proto::dump_router_resources(cluster_->a().socket(), &dump, &error)) return error;
    const nlohmann::json all = nlohmann::json::parse(dump);
    for (const auto& q : all.at("qp"))
      if (q.at("lqpn") == qp->qp_num) return q.at("engine");
    return "no such QP";
  }
  static ibv_qp_state state(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
  }
  static bool all_zero(const Buffer& b) {
    for (size_t i = 0; i < b.len; ++i)
      if (b.data[i] != 0) return false;
    return true;
  }

  static Cluster* cluster_;
  static FakePeer* peer_;
};
Cluster* FakePeerTest::cluster_ = nullptr;
FakePeer* FakePeerTest::peer_ = nullptr;

// A new message while a SEND's middle or last packet is due breaks the sequence (IBTA
// 9.8.3): the responder NAKs it as an invalid request, completes the receive the SEND had
// taken in error, and its QP goes to ERR.
TEST_F(FakePeerTest, ANewMessageInsideASendIsAnInvalidRequest) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);
  post_recv(qp, dst, 0, 4096, 7);
  ASSERT_TRUE(peer_->send(request(qp, host::kSendFirst, 0, kPayload.data(), 64)));
  ASSERT_TRUE(peer_->send(request(qp, host::kSendOnly, 1, kPayload.data(), 64)));
  expect_nak(qp, host::kNakInvalidRequest, 1);
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(state(qp), IBV_QPS_ERR);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// A WRITE carrying more than its RETH's DMA length is an invalid request: nothing of it is
// placed, not even the part the length covers, and the QP goes to ERR.
TEST_F(FakePeerTest, AWriteLongerThanItsLengthIsAnInvalidRequestAndWritesNothing) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);  // fresh anonymous pages: all zero
  host::Packet p = request(qp, host::kWriteOnly, 0, kPayload.data(), 128);
  p.reth = host::Reth{reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey, 64};
  ASSERT_TRUE(peer_->send(p));
  expect_nak(qp, host::kNakInvalidRequest, 0);
  EXPECT_TRUE(all_zero(dst));
  EXPECT_EQ(state(qp), IBV_QPS_ERR);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// An atomic at an address that is not 8-byte aligned is an invalid request (IBTA 9.4.5):
// the memory is untouched.
TEST_F(FakePeerTest, AMisalignedAtomicIsAnInvalidRequest) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);  // fresh anonymous pages: all zero
  host::Packet p = request(qp, host::kFetchAdd, 0, nullptr, 0);
  p.atomic.va = reinterpret_cast<uint64_t>(dst.data) + 4;
  p.atomic.rkey = dst.mr->rkey;
  p.atomic.swap_add = 1;
  ASSERT_TRUE(peer_->send(p));
  expect_nak(qp, host::kNakInvalidRequest, 0);
  EXPECT_TRUE(all_zero(dst));
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// A request that names the QP but comes from another QP, or carries another virtual
// network's number, is dropped as if nobody were there (IBTA 9.6.1.5; docs/wire-protocol.md,
// "Isolation"): it takes no receive and moves no PSN, so the real sender's SEND of the same
// PSN lands in the one receive posted.
TEST_F(FakePeerTest, ARequestFromAnotherQpOrNetworkIsDropped) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);
  post_recv(qp, dst, 0, 4096, 7);
  host::Packet stranger = acked_send(qp, 0, 16);
  stranger.hdr.src_qpn = kPeerQpn + 1;
  ASSERT_TRUE(peer_->send(stranger));
  host::Packet other_network = acked_send(qp, 0, 32);
  other_network.hdr.network = peer_->network() + 1000;
  ASSERT_TRUE(peer_->send(other_network));
  ASSERT_TRUE(peer_->send(acked_send(qp, 0, 64)));
  expect_ack(qp, 0);
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 64u) << "a dropped request took the receive";
  EXPECT_EQ(state(qp), IBV_QPS_RTS);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// A SEND and an atomic sent again (the requester missed their ACKs) are acknowledged again
// and never executed twice: one receive is taken, the fetch-and-add adds once and its repeat
// is answered with the value the first found.
TEST_F(FakePeerTest, RepeatedRequestsAreAnsweredAgainNotExecutedTwice) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);  // fresh anonymous pages: all zero
  post_recv(qp, dst, 64, 64, 7);
  post_recv(qp, dst, 128, 64, 8);
  ASSERT_TRUE(peer_->send(acked_send(qp, 0, 64)));
  expect_ack(qp, 0);
  ASSERT_TRUE(peer_->send(acked_send(qp, 0, 64)));
  expect_ack(qp, 0);
  host::Packet add = request(qp, host::kFetchAdd, 1, nullptr, 0);
  add.atomic.va = reinterpret_cast<uint64_t>(dst.data);
  add.atomic.rkey = dst.mr->rkey;
  add.atomic.swap_add = 5;
  const uint64_t before = 0;
  ASSERT_TRUE(peer_->send(add));
  expect_ack(qp, 1, &before);
  ASSERT_TRUE(peer_->send(add));
  expect_ack(qp, 1, &before);
  uint64_t value = 0;
  std::memcpy(&value, dst.data, sizeof(value));
  EXPECT_EQ(value, 5u) << "the fetch-and-add ran twice";
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.wr_id, 7u);
  ibv_wc more;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &more), 0) << "the repeated SEND took a second receive";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// A request past the expected PSN means packets went missing: the responder NAKs with a
// sequence error for the PSN it expects (IBTA 9.7.5.2.4), executes nothing, and stays usable.
TEST_F(FakePeerTest, APsnGapIsASequenceErrorForTheExpectedPsn) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);
  post_recv(qp, dst, 0, 4096, 7);
  ASSERT_TRUE(peer_->send(acked_send(qp, 3, 16)));
  expect_nak(qp, host::kNakPsnSequence, 0);
  ASSERT_TRUE(peer_->send(acked_send(qp, 0, 64)));
  expect_ack(qp, 0);
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.byte_len, 64u);
  EXPECT_EQ(state(qp), IBV_QPS_RTS);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// An ACK for a PSN the QP never sent (a ghost) completes nothing: the NAK for the SEND that
// follows it is what completes the SEND.
TEST_F(FakePeerTest, AnAckForAPsnNeverSentCompletesNothing) {
  ibv_qp* qp = connected_qp();
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  ASSERT_EQ(
      post_send(qp, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 9), 0);
  host::Packet sent;
  do {
    ASSERT_TRUE(peer_->receive(&sent)) << "the SEND never came";
  } while (sent.hdr.src_qpn != qp->qp_num);
  EXPECT_EQ(sent.hdr.opcode, host::opcode_of(host::kRc, host::kSendOnly));
  host::Packet answer =
      request(qp, host::kAcknowledge, (sent.hdr.psn + 100) & 0xffffff, nullptr, 0);
  answer.aeth.syndrome = host::aeth_ack();
  ASSERT_TRUE(peer_->send(answer));
  answer.hdr.psn = sent.hdr.psn;
  answer.aeth.syndrome = host::aeth_nak(host::kNakRemoteAccess);
  ASSERT_TRUE(peer_->send(answer));
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << "the ghost ACK completed the SEND";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// A READ response carrying more than the READ asked for is not placed at all: nothing lands
// past (or in) the READ's buffer, and the READ fails.
TEST_F(FakePeerTest, AReadResponseLongerThanTheReadPlacesNothing) {
  ibv_qp* qp = connected_qp();
  Buffer dst = make_buffer(a_, 4096, kFullAccess);  // fresh anonymous pages: all zero
  ASSERT_EQ(
      post_send(qp, IBV_WR_RDMA_READ, {{reinterpret_cast<uint64_t>(dst.data), 64, dst.mr->lkey}}, 9,
                IBV_SEND_SIGNALED, 0x10000, 0x1234),
      0);
  host::Packet sent;
  do {
    ASSERT_TRUE(peer_->receive(&sent)) << "the READ never came";
  } while (sent.hdr.src_qpn != qp->qp_num);
  EXPECT_EQ(sent.hdr.opcode, host::opcode_of(host::kRc, host::kReadRequest));
  EXPECT_EQ(sent.reth.dma_length, 64u);
  host::Packet answer = request(qp, host::kReadResponseOnly, sent.hdr.psn, kPayload.data(), 128);
  answer.aeth.syndrome = host::aeth_ack();
  ASSERT_TRUE(peer_->send(answer));
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_NE(wc.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(all_zero(dst));
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// A connected QP has engine state only once it moves something, and one that falls quiet
// gives it back (RemotePath parks it, router/remote.h) and goes on exactly where it was: its next
// request has the next PSN, a repeated request is still a duplicate (answered, its receive not
// taken twice), the next one is executed.
TEST_F(FakePeerTest, AQuietQpGivesItsStateBackAndGoesOnWhereItWas) {
  ibv_qp* qp = connected_qp();
  EXPECT_EQ(engine_of(qp), "none");  // connected, nothing moved yet: no state
  Buffer buf = make_buffer(a_, 4096, kFullAccess);
  post_recv(qp, buf, 0, 64, 7);
  post_recv(qp, buf, 64, 64, 8);
  ASSERT_TRUE(peer_->send(acked_send(qp, 0, 64)));
  expect_ack(qp, 0);
  EXPECT_EQ(wait_one(a_.cq).wr_id, 7u);
  const uint32_t first = send_and_ack(qp, buf);
  EXPECT_EQ(engine_of(qp), "engaged");
  // Parking sweeps come every second, also while the router has nothing else to do (asking
  // it would wake it: it is left alone meanwhile); a QP quiet through a whole period is
  // parked, so within 2 s.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  ASSERT_EQ(engine_of(qp), "parked") << "the quiet QP kept its state";
  ASSERT_TRUE(peer_->send(acked_send(qp, 0, 64)));
  expect_ack(qp, 0);
  ASSERT_TRUE(peer_->send(acked_send(qp, 1, 64)));
  expect_ack(qp, 1);
  EXPECT_EQ(wait_one(a_.cq).wr_id, 8u);
  ibv_wc more;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &more), 0) << "the repeated SEND took a second receive";
  EXPECT_EQ(send_and_ack(qp, buf), (first + 1) & 0xffffff);
  EXPECT_EQ(engine_of(qp), "engaged");
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

}  // namespace
}  // namespace wharf::verify
