// Tests for RemotePath::peer_host (router/remote.h): the host a connected QP's peer is on,
// cached in the QP until its address or a placement changes.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <memory>

#include "links/cluster.h"
#include "proto/vip_gid.h"
#include "router/remote.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

constexpr char kCluster[] =
    "a 127.0.0.1 198.18.1.0/24 1-1024 4000\n"
    "b 127.0.0.1 198.18.2.0/24 1025-2048 4001\n";

uint32_t ip(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1);
  return ntohl(a.s_addr);
}

class PeerHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.socket_path = "/nonexistent/wharf-peer-host-test.sock";  // never started
    router_ = std::make_unique<Router>(cfg_);
    auto dir = std::make_unique<links::StaticCluster>();
    ASSERT_EQ(dir->load(kCluster, "a"), "");
    path_ = std::make_unique<RemotePath>(router_->paths(), router_->config(), router_->counters(),
                                         router_->cm(), networks_, std::move(dir));
    container_.network_id = 7;
    session_ = std::make_unique<Session>(router_.get(), UniqueFd(), 0, 0, &container_);
    qp_.type = IBV_QPT_RC;
    qp_.owner = session_.get();
    qp_.attr.ah_attr.is_global = 1;
    qp_.attr.ah_attr.dgid = proto::gid_for_vip(peer_vip_);
    router_->objects().add_qp(&qp_);  // the router knows it, as every QP
  }
  void TearDown() override { router_->objects().remove_qp(qp_.qpn); }

  RouterConfig cfg_;
  std::unique_ptr<Router> router_;
  NetworkNumbers networks_;
  std::unique_ptr<RemotePath> path_;
  Container container_;
  std::unique_ptr<Session> session_;
  Qp qp_;
  const uint32_t peer_vip_ = ip("198.18.1.9");  // in a's subnet: this host's
};

TEST_F(PeerHostTest, APlacementMovesThePeerAndTheCacheFollows) {
  EXPECT_EQ(path_->peer_host(&qp_), -1);  // this host
  path_->set_placement_st(7, peer_vip_, "b");
  EXPECT_EQ(path_->peer_host(&qp_), 1);
  path_->set_placement_st(7, peer_vip_, "");  // deleted: its subnet's host again
  EXPECT_EQ(path_->peer_host(&qp_), -1);
}

// The placement epoch has 16 bits: after a full turn of placements a QP's cached answer
// must not pass for a fresh one.
TEST_F(PeerHostTest, ACachedAnswerDoesNotOutliveATurnOfThePlacementEpoch) {
  path_->set_placement_st(7, peer_vip_, "b");
  EXPECT_EQ(path_->peer_host(&qp_), 1);  // cached now
  path_->set_placement_st(7, peer_vip_, "");
  // The epoch takes 65535 values (never 0): 65534 more placements bring it back to the one
  // the answer was cached in.
  const uint32_t other = ip("198.18.2.77");
  for (int i = 0; i < 65534; ++i) path_->set_placement_st(7, other, "b");
  EXPECT_EQ(path_->peer_host(&qp_), -1);
}

}  // namespace
}  // namespace wharf::router
