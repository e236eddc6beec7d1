// The connection manager (router/cm_manager.h) on its own, between two hosts joined by a
// simulated network the tests control: MADs wait in flight until delivered, and can be
// lost, repeated, refused by a full link, or lost with the link. Each host's manager works
// through a CmEnvironment of the test's (no Router loop, no socket, no other host's router);
// time is what the tests pass to expire_st. Events are read from the channels' sockets as a
// library reads them.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "proto/cm_messages.h"
#include "proto/codec.h"
#include "proto/vip_gid.h"
#include "router/cm_manager.h"
#include "router/host_objects.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

constexpr uint16_t kPort = 7471;
constexpr int32_t kRejTimeout = 1;  // IBTA reject reason 1: timeout

struct InFlight {
  int from;
  int to;
  proto::CmMad mad;
};

// The hosts' shared network: what was sent and not yet delivered.
struct SimNet {
  std::deque<InFlight> flight;
  bool link_full = false;  // every send is refused, as by a full or missing host link
};

// One host: its router's configuration and QPs, a container with one library session and
// event channel, and its connection manager.
class SimHost final : public CmEnvironment {
 public:
  SimHost(int index, SimNet* net, const std::vector<SimHost*>* hosts)
      : index_(index), net_(net), hosts_(hosts) {
    cfg_.socket_path = "/nonexistent/wharf-cm-network-test.sock";  // never started
    router_ = std::make_unique<Router>(cfg_);                      // only as the session's
    container_.tenant = "acme";
    container_.network = "blue";
    container_.name = "c" + std::to_string(index);
    container_.vip = vip();
    container_.lid = static_cast<uint16_t>(10 + index);
    container_.gid = proto::gid_for_vip(vip());
    container_.registered = true;
    session_ = std::make_unique<Session>(router_.get(), UniqueFd(), getpid(), 0, &container_);
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    channel_.owner = session_.get();
    channel_.sock.reset(sv[0]);
    events_.reset(sv[1]);
    qp_.owner = session_.get();
    EXPECT_TRUE(objects_.add_qp(&qp_));
  }
  ~SimHost() override {
    for (CmId* id : ids_) cm_.destroy_st(id);
    objects_.remove_qp(qp_.qpn);
  }

  uint32_t vip() const { return 0xc6120001 + static_cast<uint32_t>(index_); }  // 198.18.0.x
  CmManager& cm() { return cm_; }
  uint32_t qpn() const { return qp_.qpn; }

  // A new RC id of the session, on the channel.
  CmId* make_id() {
    auto id = std::make_unique<CmId>();
    id->channel = &channel_;
    id->ps = RDMA_PS_TCP;
    id->qp_type = IBV_QPT_RC;
    channel_.users++;
    CmId* made = session_->adopt_cm_id(std::move(id));
    cm_.add_st(made);
    ids_.push_back(made);
    return made;
  }
  CmId* listen() {
    CmId* l = make_id();
    EXPECT_EQ(cm_.bind_st(l, CmAddress::ipv4(0, kPort)), 0);
    EXPECT_EQ(cm_.listen_st(l, 8), 0);
    return l;
  }
  // The next event on the channel (event UINT32_MAX if there is none).
  proto::CmEventMsg next_event() {
    proto::CmEventMsg ev;
    ev.event = UINT32_MAX;
    uint8_t buf[proto::kCmEventSize + 8];
    const ssize_t n = recv(events_.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      EXPECT_TRUE(proto::decode(buf, static_cast<size_t>(n), &ev));
    }
    return ev;
  }
  bool quiet() { return next_event().event == UINT32_MAX; }
  // The id the manager made for a connection request to listener l (the newest one).
  static CmId* request_of(const CmId* l) {
    EXPECT_FALSE(l->requests.empty());
    return l->requests.empty() ? nullptr : l->requests.back();
  }
  // Ids the manager made are the session's; the test destroys them too, before the session.
  void track(CmId* id) { ids_.push_back(id); }

  // CmEnvironment
  const Container* container_with_vip(uint32_t vip, const std::string& tenant,
                                      const std::string& network) const override {
    const bool mine =
        vip == container_.vip && tenant == container_.tenant && network == container_.network;
    return mine ? &container_ : nullptr;
  }
  int cm_host_for(const proto::AhAttr& ah, const Container*) const override {
    for (const SimHost* h : *hosts_)
      if (h != this && ah.dgid == proto::gid_for_vip(h->vip())) return h->index_;
    return -1;
  }
  bool send_cm_st(int host, const proto::CmMad& m) override {
    if (net_->link_full) return false;
    net_->flight.push_back({index_, host, m});
    return true;
  }
  void watch_cm_channel_st(CmChannel*) override {}
  bool cm_host_known(int host) const override {
    return host == kThisHost ||
           (host >= 0 && static_cast<size_t>(host) < hosts_->size() && host != index_);
  }

 private:
  const int index_;
  SimNet* net_;
  const std::vector<SimHost*>* hosts_;
  RouterConfig cfg_;
  HostObjects objects_;
  std::unique_ptr<Router> router_;
  Container container_;
  CmChannel channel_;  // declared before the session, which may still use it when it goes
  UniqueFd events_;    // the library's end of the channel
  std::unique_ptr<Session> session_;
  Qp qp_;
  CmManager cm_{cfg_, objects_, *this};
  std::vector<CmId*> ids_;
};

class CmNetworkTest : public ::testing::Test {
 protected:
  CmNetworkTest() {
    hosts_ = {&a_, &b_};
    server_ = b_.listen();
  }
  SimHost& host(int i) { return i == 0 ? a_ : b_; }
  // Delivers the MAD first in flight; false if none was.
  bool deliver_one() {
    if (net_.flight.empty()) return false;
    const InFlight f = net_.flight.front();
    net_.flight.pop_front();
    host(f.to).cm().on_mad_st(f.from, f.mad);
    return true;
  }
  void deliver_all() {
    for (int i = 0; i < 100 && deliver_one(); ++i) {
    }
    EXPECT_TRUE(net_.flight.empty()) << "MADs kept coming";
  }
  // A's id with B's container's address resolved (an AddrQuery answered by B's manager) and
  // its route resolved.
  CmId* routed_client() {
    CmId* id = a_.make_id();
    EXPECT_EQ(a_.cm().resolve_addr_st(id, nullptr, CmAddress::ipv4(b_.vip(), kPort), 0), 0);
    deliver_all();
    proto::CmEventMsg ev = a_.next_event();
    EXPECT_EQ(ev.event, RDMA_CM_EVENT_ADDR_RESOLVED);
    EXPECT_EQ(ev.remote_lid, 11);
    EXPECT_EQ(a_.cm().resolve_route_st(id), 0);
    EXPECT_EQ(a_.next_event().event, RDMA_CM_EVENT_ROUTE_RESOLVED);
    return id;
  }
  static proto::CmConnParam param(uint32_t qpn) {
    proto::CmConnParam p;
    p.qp_num = qpn;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    return p;
  }
  // A's connection request to B's listener, accepted there: *passive is B's id, and the REP
  // is in flight.
  CmId* accepted(CmId** passive) {
    CmId* id = routed_client();
    EXPECT_EQ(a_.cm().connect_st(id, param(a_.qpn())), 0);
    deliver_all();
    EXPECT_EQ(b_.next_event().event, RDMA_CM_EVENT_CONNECT_REQUEST);
    *passive = SimHost::request_of(server_);
    b_.track(*passive);
    EXPECT_EQ(b_.cm().accept_st(*passive, param(b_.qpn())), 0);
    return id;
  }
  // A connection from A to B's listener, established on both sides; *passive is B's id.
  CmId* connected(CmId** passive) {
    CmId* id = accepted(passive);
    deliver_all();
    EXPECT_EQ(a_.next_event().event, RDMA_CM_EVENT_CONNECT_RESPONSE);
    EXPECT_EQ(a_.cm().establish_st(id), 0);  // the library's RTU
    deliver_all();
    EXPECT_EQ(b_.next_event().event, RDMA_CM_EVENT_ESTABLISHED);
    return id;
  }

  SimNet net_;
  std::vector<SimHost*> hosts_;
  SimHost a_{0, &net_, &hosts_};
  SimHost b_{1, &net_, &hosts_};
  CmId* server_ = nullptr;
};

TEST_F(CmNetworkTest, AConnectionBetweenHostsIsMadeAndEndedByItsMads) {
  CmId* passive = nullptr;
  CmId* id = connected(&passive);
  EXPECT_EQ(id->state, CmState::kEstablished);
  EXPECT_EQ(passive->state, CmState::kEstablished);
  EXPECT_EQ(a_.cm().disconnect_st(id), 0);
  EXPECT_EQ(a_.next_event().event, RDMA_CM_EVENT_DISCONNECTED);
  deliver_all();
  EXPECT_EQ(b_.next_event().event, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_TRUE(a_.quiet());
  EXPECT_TRUE(b_.quiet());
}

// An address on the other host is resolved by asking its router; an address nobody holds
// there is unreachable, and so is one whose query the link refuses.
TEST_F(CmNetworkTest, AnAddressNoContainerHoldsIsUnreachable) {
  CmId* id = a_.make_id();
  ASSERT_EQ(a_.cm().resolve_addr_st(id, nullptr, CmAddress::ipv4(b_.vip() + 5, kPort), 0), 0);
  EXPECT_TRUE(net_.flight.empty());  // no host's subnet holds it here: not even asked
  proto::CmEventMsg ev = a_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_ADDR_ERROR);
  EXPECT_EQ(ev.status, -EHOSTUNREACH);
  net_.link_full = true;
  CmId* other = a_.make_id();
  ASSERT_EQ(a_.cm().resolve_addr_st(other, nullptr, CmAddress::ipv4(b_.vip(), kPort), 0), 0);
  ev = a_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_ADDR_ERROR);
  EXPECT_EQ(ev.status, -EHOSTUNREACH);
}

// A REQ the link cannot take fails at once, as an unanswered one would later; the passive
// side never hears of it.
TEST_F(CmNetworkTest, ARequestTheLinkRefusesIsRejectedAtOnce) {
  CmId* id = routed_client();
  net_.link_full = true;
  ASSERT_EQ(a_.cm().connect_st(id, param(a_.qpn())), 0);
  const proto::CmEventMsg ev = a_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(ev.status, kRejTimeout);
  EXPECT_TRUE(net_.flight.empty());
  EXPECT_TRUE(b_.quiet());
  EXPECT_TRUE(server_->requests.empty());
}

// A REQ lost without a trace: the requester gives up after cm_timeout_ns, not before, and
// tells the passive side (REJ) in case it got there after all.
TEST_F(CmNetworkTest, ALostRequestTimesOutAfterTheCmTimeout) {
  CmId* id = routed_client();
  const uint64_t sent = now_ns();
  ASSERT_EQ(a_.cm().connect_st(id, param(a_.qpn())), 0);
  ASSERT_EQ(net_.flight.size(), 1u);
  net_.flight.clear();                   // lost
  const uint64_t due = id->deadline_ns;  // next_deadline() may name a stale, earlier one
  ASSERT_NE(due, 0u);
  EXPECT_GE(due, sent + RouterConfig{}.cm_timeout_ns);
  a_.cm().expire_st(due - 1);
  EXPECT_TRUE(a_.quiet());
  a_.cm().expire_st(due);
  const proto::CmEventMsg ev = a_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_UNREACHABLE);
  EXPECT_EQ(ev.status, -ETIMEDOUT);
  ASSERT_EQ(net_.flight.size(), 1u);
  EXPECT_EQ(net_.flight.front().mad.type, proto::kCmRej);
  deliver_all();  // the listener has no request of it: nothing happens there
  EXPECT_TRUE(b_.quiet());
}

// A lost REP: the passive side times out (UNREACHABLE) and rejects, so the requester, still
// waiting, hears REJECTED rather than waiting out its own timer.
TEST_F(CmNetworkTest, ALostReplyFailsBothSides) {
  CmId* passive = nullptr;
  CmId* id = accepted(&passive);
  net_.flight.clear();  // the REP is lost
  b_.cm().expire_st(b_.cm().next_deadline());
  proto::CmEventMsg ev = b_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_UNREACHABLE);
  EXPECT_EQ(ev.status, -ETIMEDOUT);
  deliver_all();
  ev = a_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(ev.status, kRejTimeout);
  EXPECT_EQ(id->state, CmState::kClosed);
  a_.cm().expire_st(a_.cm().next_deadline());  // its own timer, when it comes: nothing more
  EXPECT_TRUE(a_.quiet());
}

// A requester whose REP was lost gives up and rejects naming nobody (it never learned the
// passive side's communication ID): the passive side, which accepted, hears REJECTED at once
// rather than waiting out its own timer.
TEST_F(CmNetworkTest, ARejectNamingNobodyReachesTheAcceptedPassiveSide) {
  CmId* passive = nullptr;
  CmId* id = accepted(&passive);
  net_.flight.clear();  // the REP is lost
  a_.cm().expire_st(id->deadline_ns);
  EXPECT_EQ(a_.next_event().event, RDMA_CM_EVENT_UNREACHABLE);
  ASSERT_EQ(net_.flight.size(), 1u);
  EXPECT_EQ(net_.flight.front().mad.type, proto::kCmRej);
  EXPECT_EQ(net_.flight.front().mad.receiver_comm, 0u);
  deliver_all();
  EXPECT_EQ(b_.next_event().event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(passive->state, CmState::kClosed);
  EXPECT_TRUE(b_.quiet());
}

// A REQ that arrives twice (a peer's repeat, or a forged copy) makes one request.
TEST_F(CmNetworkTest, ARepeatedRequestMakesOneConnectionRequest) {
  CmId* id = routed_client();
  ASSERT_EQ(a_.cm().connect_st(id, param(a_.qpn())), 0);
  ASSERT_EQ(net_.flight.size(), 1u);
  net_.flight.push_back(net_.flight.front());
  deliver_all();
  EXPECT_EQ(b_.next_event().event, RDMA_CM_EVENT_CONNECT_REQUEST);
  EXPECT_TRUE(b_.quiet());
  ASSERT_EQ(server_->requests.size(), 1u);
  b_.track(server_->requests.front());
}

// Only the id's peer host may answer it: a REP naming the requester's communication ID but
// coming from another host is dropped.
TEST_F(CmNetworkTest, AMadFromAHostThatIsNotThePeerIsDropped) {
  CmId* id = routed_client();
  ASSERT_EQ(a_.cm().connect_st(id, param(a_.qpn())), 0);
  proto::CmMad forged = net_.flight.front().mad;
  forged.type = proto::kCmRep;
  forged.receiver_comm = forged.sender_comm;
  forged.sender_comm = 0x5151;
  a_.cm().on_mad_st(/*from=*/2, forged);
  EXPECT_TRUE(a_.quiet());
  EXPECT_EQ(id->state, CmState::kConnecting);
}

// The link to the peer breaks: what was in flight is lost. Handshakes under way fail at
// once; an established connection stays (its QPs recover by themselves) and still ends
// with a DREQ its peer hears.
TEST_F(CmNetworkTest, ALostLinkFailsHandshakesAndKeepsConnections) {
  CmId* passive = nullptr;
  CmId* established = connected(&passive);
  CmId* id = routed_client();
  ASSERT_EQ(a_.cm().connect_st(id, param(a_.qpn())), 0);
  net_.flight.clear();
  a_.cm().on_host_lost_st(1, /*link_only=*/true);
  const proto::CmEventMsg ev = a_.next_event();
  EXPECT_EQ(ev.event, RDMA_CM_EVENT_REJECTED);
  EXPECT_EQ(ev.status, kRejTimeout);
  EXPECT_TRUE(a_.quiet());
  EXPECT_EQ(established->state, CmState::kEstablished);
  ASSERT_EQ(a_.cm().disconnect_st(established), 0);
  EXPECT_EQ(a_.next_event().event, RDMA_CM_EVENT_DISCONNECTED);
  deliver_all();
  EXPECT_EQ(b_.next_event().event, RDMA_CM_EVENT_DISCONNECTED);
  // The peer's router itself gone: its established connections end too.
  CmId* second_passive = nullptr;
  CmId* second = connected(&second_passive);
  a_.cm().on_host_lost_st(1, /*link_only=*/false);
  EXPECT_EQ(a_.next_event().event, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(second->state, CmState::kClosed);
}

}  // namespace
}  // namespace wharf::router
