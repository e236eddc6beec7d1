// KeptCmIds (router/kept_cm_ids.h): the connection manager's ids in a file that outlives the
// router process. A process "dies" here by dropping its object without releasing anything, as
// a SIGKILL leaves the file; the next one opens the same path.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "common/clock.h"
#include "router/cm_objects.h"
#include "router/kept_cm_ids.h"
#include "support/temp_dir.h"

namespace wharf::router {
namespace {

KeptCmId record(uint64_t netns, int32_t pid, uint32_t handle, uint32_t comm) {
  KeptCmId k;
  k.netns_ino = netns;
  k.pid = pid;
  k.handle = handle;
  k.comm = comm;
  k.state = static_cast<uint8_t>(CmState::kEstablished);
  k.peer_comm = comm + 100;
  return k;
}

class KeptCmIdsTest : public ::testing::Test {
 protected:
  std::unique_ptr<KeptCmIds> open() {
    auto kept = std::make_unique<KeptCmIds>();
    EXPECT_EQ(kept->open(path_), 0);
    EXPECT_TRUE(kept->persistent());
    return kept;
  }
  test_support::TempDir dir_{"wharf-kept-cm"};
  std::string path_ = dir_.path() + "/wharfd.sock.cm";
};

TEST_F(KeptCmIdsTest, EachProcessClaimsItsOwnIdsOnceFromTheNextRouterProcess) {
  auto first = open();
  const uint32_t a = first->keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11));
  const uint32_t b = first->keep(KeptCmIds::kNoSlot, record(7, 100, 2, 12));
  const uint32_t c = first->keep(KeptCmIds::kNoSlot, record(7, 200, 1, 13));
  ASSERT_NE(a, KeptCmIds::kNoSlot);
  ASSERT_NE(b, a);
  ASSERT_NE(c, b);
  KeptCmId moved = record(7, 100, 2, 12);
  moved.state = static_cast<uint8_t>(CmState::kClosed);
  EXPECT_EQ(first->keep(b, moved), b) << "a changed id keeps its slot";
  first.reset();  // killed

  auto second = open();
  EXPECT_EQ(second->left(), 3u);
  auto mine = second->claim(7, 100);
  ASSERT_EQ(mine.size(), 2u);
  for (const KeptCmIds::Left& l : mine) {
    if (l.id.handle == 2) {
      EXPECT_EQ(l.id.state, static_cast<uint8_t>(CmState::kClosed)) << "its latest record";
      EXPECT_EQ(l.slot, b);
    } else {
      EXPECT_EQ(l.id.comm, 11u);
      EXPECT_EQ(l.id.peer_comm, 111u);
    }
  }
  EXPECT_TRUE(second->claim(7, 100).empty()) << "claimed once";
  EXPECT_TRUE(second->claim(8, 200).empty()) << "another container's process";
  EXPECT_EQ(second->claim(7, 200).size(), 1u);
}

// A DREQ for an id nobody claimed yet closes its record (in the file too: a process killed
// again before the claim leaves it so), if it comes from that id's peer and the id was
// connected; the claim then sees peer_left.
TEST_F(KeptCmIdsTest, ADisconnectionFromItsPeerClosesAnUnclaimedIdsRecord) {
  auto first = open();
  KeptCmId connected = record(7, 100, 1, 11);
  connected.peer_host = 2;
  KeptCmId listening = record(7, 100, 2, 12);
  listening.state = static_cast<uint8_t>(CmState::kListening);
  first->keep(KeptCmIds::kNoSlot, connected);
  first->keep(KeptCmIds::kNoSlot, listening);
  first.reset();

  auto second = open();
  EXPECT_FALSE(second->disconnect_left(11, 3, 111)) << "from another host";
  EXPECT_FALSE(second->disconnect_left(11, 2, 999)) << "from another id of its peer's host";
  EXPECT_FALSE(second->disconnect_left(12, -1, 112)) << "an id that is not connected";
  EXPECT_TRUE(second->disconnect_left(11, 2, 111));
  second.reset();

  auto third = open();
  for (const KeptCmIds::Left& l : third->claim(7, 100)) {
    if (l.id.comm != 11) continue;
    EXPECT_EQ(l.id.state, static_cast<uint8_t>(CmState::kClosed));
    EXPECT_EQ(l.id.peer_left, 1);
    EXPECT_EQ(l.id.peer_comm, 0u);
  }
}

// A slot is rewritten in its older copy: a process killed in the middle of a write leaves a
// copy whose checksum fails, and the next process reads the other.
TEST_F(KeptCmIdsTest, ARecordTornByAKillLeavesTheOneBeforeIt) {
  auto first = open();
  const uint32_t s = first->keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11));
  KeptCmId later = record(7, 100, 1, 11);
  later.state = static_cast<uint8_t>(CmState::kClosed);
  first->keep(s, later);
  first.reset();
  {
    // Tear the newer copy (the second one written: copy 1 of slot s) in the file.
    const int fd = ::open(path_.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    const off_t slot_size = (st.st_size - 4096) / KeptCmIds::kSlots;
    const off_t copy1 = 4096 + slot_size * s + slot_size / 2;
    const uint8_t junk = 0x5a;
    ASSERT_EQ(pwrite(fd, &junk, 1, copy1 + 12), 1);
    ::close(fd);
  }
  auto second = open();
  auto left = second->claim(7, 100);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id.state, static_cast<uint8_t>(CmState::kEstablished));
}

TEST_F(KeptCmIdsTest, ReleasedIdsAreNotLeft) {
  auto first = open();
  first->release(first->keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11)));
  first.reset();
  EXPECT_EQ(open()->left(), 0u);
}

TEST_F(KeptCmIdsTest, IdsNobodyClaimedAreForgottenAfterTheirTime) {
  auto first = open();
  first->keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11));
  first.reset();
  auto second = open();
  second->drop_stale(now_ns());
  EXPECT_EQ(second->left(), 1u) << "too early";
  second->drop_stale(now_ns() + KeptCmIds::kOrphanLifeNs);
  EXPECT_EQ(second->left(), 0u);
  second.reset();
  EXPECT_EQ(open()->left(), 0u) << "forgotten in the file too";
}

// Only a file of this user that nobody else may read or write, of this layout, is read.
TEST_F(KeptCmIdsTest, AFileOthersMayWriteOrOfAnotherSizeStartsAfresh) {
  auto first = open();
  first->keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11));
  first.reset();
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  auto second = open();
  EXPECT_EQ(second->left(), 0u);
  second->keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11));
  second.reset();
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(truncate(path_.c_str(), 8192), 0);
  EXPECT_EQ(open()->left(), 0u);
}

TEST_F(KeptCmIdsTest, WithoutAPathNothingIsKept) {
  KeptCmIds kept;
  ASSERT_EQ(kept.open(""), 0);
  EXPECT_FALSE(kept.persistent());
  EXPECT_EQ(kept.keep(KeptCmIds::kNoSlot, record(7, 100, 1, 11)), KeptCmIds::kNoSlot);
}

}  // namespace
}  // namespace wharf::router
