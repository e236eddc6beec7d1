// The test helper that finds free ports for test routers' and etcd's listeners
// (tests/support/free_ports.h).
#include <gtest/gtest.h>

#include "support/free_ports.h"

namespace wharf::test_support {
namespace {

// Regression: the ports came from the kernel's ephemeral range, where an outgoing connection
// could take one before the listener bound it (ExpressLinesTest's third router once found its
// express port taken).
TEST(FreePorts, ComeFromBelowTheRangeOutgoingConnectionsUse) {
  const int first = first_ephemeral_port();
  if (first <= 10000 + 6) GTEST_SKIP() << "this system leaves no ports below " << first;
  for (int i = 0; i < 20; ++i) {
    const int port = free_ports(6);
    ASSERT_NE(port, 0);
    EXPECT_GE(port, 10000);
    EXPECT_LT(port + 5, first);
    EXPECT_TRUE(ports_free(port, 6));
  }
}

TEST(FreePorts, APortSomethingListensOnIsNotFree) {
  const int port = free_ports(1);
  ASSERT_NE(port, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  EXPECT_FALSE(ports_free(port, 1));
  EXPECT_FALSE(ports_free(port - 1, 2));
  close(fd);
  EXPECT_TRUE(ports_free(port, 1));
  EXPECT_FALSE(ports_free(65535, 2));  // past the last port
}

}  // namespace
}  // namespace wharf::test_support
