// Host links (links/host_links.h) between two routers' ends on loopback: packets arrive
// whole and in order, queues are bounded, a peer that dies or restarts is noticed, and a
// connection stalled by a cut path is replaced as soon as the path returns.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "links/host_links.h"
#include "support/free_ports.h"
#include "support/host_links_ends.h"

namespace wharf::links {
namespace {

namespace host = proto::host;

using test_support::cluster_text;
using test_support::End;
using test_support::packet;
using test_support::pump;
using test_support::two_host_cluster;

// What for_each_link reports: by (host, DSCP), the stats and whether our connection is linked.
struct Link {
  HostLinks::LinkStats stats;
  bool up = false;
};
std::map<std::pair<int, int>, Link> links_of(const HostLinks& l) {
  std::map<std::pair<int, int>, Link> out;
  l.for_each_link([&out](int host, int dscp, const HostLinks::LinkStats& s, bool up) {
    out[{host, dscp}] = Link{s, up};
  });
  return out;
}

TEST(HostLinksTest, PacketsArriveWholeAndInOrder) {
  const std::string text = two_host_cluster();
  End a(text, "a"), b(text, "b");
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < 200; ++i) {
    sent.emplace_back((i * 977) % host::kMaxSegment, static_cast<uint8_t>(i));
    ASSERT_TRUE(a.links->send(1, 0, packet(i, sent.back())));
    a.links->poll();
  }
  ASSERT_TRUE(pump({&a, &b}, [&] { return b.rec.psns.size() == sent.size(); }));
  for (uint32_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(b.rec.psns[i], i);
    EXPECT_EQ(b.rec.payloads[i], sent[i]) << i;
  }
  // And back, on the connection b opens.
  std::vector<uint8_t> reply(10, 0xee);
  ASSERT_TRUE(b.links->send(0, 0, packet(7, reply)));
  ASSERT_TRUE(pump({&a, &b}, [&] { return a.rec.psns.size() == 1; }));
  EXPECT_EQ(a.rec.payloads[0], reply);
  EXPECT_EQ(a.rec.link_lost + b.rec.link_lost, 0);
}

// Each link counts what it moved both ways, per peer and class: what one end wrote the other
// read (the Hello each way included), in the class the packets were sent in.
TEST(HostLinksTest, EachLinkCountsWhatItMovedPerPeerAndClass) {
  const std::string text = two_host_cluster();
  End a(text, "a"), b(text, "b");
  const std::vector<uint8_t> payload(1000, 0x11);
  constexpr uint8_t kTrafficClass = 3 << 2;  // DSCP 3
  for (uint32_t i = 0; i < 50; ++i)
    ASSERT_TRUE(a.links->send(1, kTrafficClass, packet(i, payload)));
  // Until b has every packet and a has b's Hello.
  ASSERT_TRUE(pump({&a, &b}, [&] {
    const auto at_a = links_of(*a.links);
    return b.rec.psns.size() == 50 && at_a.size() == 1 && at_a.begin()->second.up;
  }));
  const auto at_a = links_of(*a.links);
  const auto at_b = links_of(*b.links);
  ASSERT_EQ(at_a.size(), 1u);
  ASSERT_EQ(at_b.size(), 1u);
  const Link& ab = at_a.at({1, 3});
  const Link& ba = at_b.at({0, 3});
  EXPECT_GE(ab.stats.tx_bytes, 50u * payload.size());
  EXPECT_EQ(ab.stats.tx_bytes, ba.stats.rx_bytes);
  EXPECT_EQ(ab.stats.rx_bytes, ba.stats.tx_bytes);
  EXPECT_EQ(ba.stats.tx_bytes, host::kHelloSize);  // b only answered the Hello
  EXPECT_TRUE(ab.up);
  EXPECT_FALSE(ba.up) << "b opened no connection of its own";
  EXPECT_EQ(ab.stats.linked, 1u);
}

// A peer's Hello as router "a" of incarnation 7 sends it, then the packets appended to it.
std::vector<uint8_t> hello_from_a() {
  std::vector<uint8_t> stream(host::kHelloSize);
  host::Hello hello;
  hello.incarnation = 7;
  std::memcpy(hello.host.data(), "a", 2);
  EXPECT_EQ(proto::encode(hello, stream.data(), stream.size()), host::kHelloSize);
  return stream;
}
void append(std::vector<uint8_t>* stream, const host::Packet& p) {
  const size_t at = stream->size();
  stream->resize(at + host::kPacketHeaderSize + p.hdr.length);
  const size_t n = host::encode_headers(p, stream->data() + at, stream->size() - at);
  ASSERT_NE(n, 0u);
  std::memcpy(stream->data() + at + n, p.payload, p.payload_len);
}

// End b listening, and what a plain socket playing router a writes to it: the Hello, then
// the packets a test appends (their payloads in `sent`).
struct StreamToB {
  int port = test_support::free_ports(2);
  End b{cluster_text(port, port + 1), "b"};
  std::vector<uint8_t> stream = hello_from_a();
  std::vector<std::vector<uint8_t>> sent;
  // Writes the stream in pieces of every size from one byte to several packets, each piece
  // read by b before the next is written: b's reader meets the bytes cut anywhere (in the
  // Hello, in a header, in a payload, many packets at once); then b reads until `packets`
  // packets came.
  void write_cut_anywhere(size_t packets) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port + 1));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const size_t pieces[] = {1, 2, 27, 28, 29, 100, 4096, 65535, 65536 + 200, 300000};
    size_t off = 0;
    for (size_t k = 0; off < stream.size(); ++k) {
      const size_t n = std::min(pieces[k % std::size(pieces)], stream.size() - off);
      ASSERT_EQ(write(fd.get(), stream.data() + off, n), static_cast<ssize_t>(n));
      off += n;
      const size_t before = b.rec.psns.size();
      // b reads all of it (a whole packet or not) before the next piece.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      for (int idle = 0; idle < 3 && std::chrono::steady_clock::now() < deadline;)
        idle = b.links->poll() ? 0 : idle + 1;
      ASSERT_GE(b.rec.psns.size(), before);
    }
    ASSERT_TRUE(pump({&b}, [&] { return b.rec.psns.size() == packets; }));
  }
};

TEST(HostLinksTest, PacketsCutAnywhereArriveWhole) {
  StreamToB to;
  ASSERT_NE(to.port, 0);
  End& b = to.b;
  std::vector<std::vector<uint8_t>>& sent = to.sent;
  for (uint32_t i = 0; i < 40; ++i) {
    const size_t len = i % 4 == 0 ? host::kMaxSegment : (i * 7919u) % 3000;
    sent.emplace_back(len, static_cast<uint8_t>(i * 3 + 1));
    append(&to.stream, packet(i, sent.back()));
  }
  to.write_cut_anywhere(sent.size());
  for (uint32_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(b.rec.psns[i], i);
    EXPECT_EQ(b.rec.payloads[i], sent[i]) << i;
  }
  EXPECT_EQ(b.rec.link_lost, 0);
}

// READ response packet `psn` of RC QP 0x100 carrying `payload`.
host::Packet read_response(uint32_t psn, host::Operation op, const std::vector<uint8_t>& payload) {
  host::Packet p = packet(psn, payload);
  p.hdr.opcode = host::opcode_of(host::kRc, op);
  EXPECT_TRUE(host::finish_packet(&p));
  return p;
}

// A handler that takes payloads where they are to go has them received there, cut anywhere;
// one whose answer changes while a payload comes in has that packet dropped (counted), its
// memory not written after the change, and the packets after it arrive as ever.
TEST(HostLinksTest, PayloadsArriveWhereTheHandlerPlacesThem) {
  StreamToB to;
  ASSERT_NE(to.port, 0);
  End& b = to.b;
  std::vector<std::vector<uint8_t>>& sent = to.sent;
  const host::Operation ops[] = {host::kReadResponseFirst, host::kReadResponseMiddle,
                                 host::kReadResponseLast, host::kSendOnly};
  for (uint32_t i = 0; i < 24; ++i) {
    const host::Operation op = ops[i % 4];
    const size_t len = op == host::kSendOnly ? 100 : i == 9 ? 5000 : host::kMaxSegment;
    sent.emplace_back(len, static_cast<uint8_t>(i * 5 + 2));
    append(&to.stream, read_response(i, op, sent.back()));
  }
  // The first payload whose destination is asked for again (a later read of it) finds it
  // moved: that packet is dropped.
  std::vector<std::vector<uint8_t>> memory(sent.size(),
                                           std::vector<uint8_t>(host::kMaxSegment, 0xee));
  std::vector<uint8_t> elsewhere(host::kMaxSegment, 0xee);
  std::map<uint32_t, int> asked;
  uint32_t moved = ~0u;
  b.rec.place = [&](const host::Packet& p) -> uint8_t* {
    if (!host::is_read_response(p.hdr.opcode & 0x1f)) return nullptr;
    EXPECT_EQ(p.payload, nullptr);
    EXPECT_EQ(p.payload_len, sent.at(p.hdr.psn).size());
    if (asked[p.hdr.psn]++ > 0 && moved == ~0u) moved = p.hdr.psn;
    return moved == p.hdr.psn ? elsewhere.data() : memory[p.hdr.psn].data();
  };
  to.write_cut_anywhere(sent.size() - 1);
  ASSERT_NE(moved, ~0u) << "no payload took more than one read";
  EXPECT_EQ(b.links->abandoned_placements(), 1u);
  EXPECT_EQ(elsewhere, std::vector<uint8_t>(host::kMaxSegment, 0xee)) << "written after it moved";
  size_t placed = 0;
  for (uint32_t i = 0, k = 0; i < sent.size(); ++i) {
    if (i == moved) continue;
    ASSERT_EQ(b.rec.psns[k], i);
    EXPECT_EQ(b.rec.payloads[k], sent[i]) << i;
    if (b.rec.payload_at[k] == memory[i].data()) {
      ++placed;
      EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(), memory[i].begin())) << i;
    }
    ++k;
  }
  // Payloads that came whole in one read are copied as before; most are not.
  EXPECT_GE(placed, 10u);
  EXPECT_EQ(b.rec.link_lost, 0);
}

TEST(HostLinksTest, AFullQueueRefusesUntilItDrains) {
  const std::string text = two_host_cluster();
  End a(text, "a"), b(text, "b");
  std::vector<uint8_t> big(host::kMaxSegment, 1);
  int queued = 0;
  while (a.links->send(1, 0, packet(static_cast<uint32_t>(queued), big))) ++queued;  // never polled
  EXPECT_GE(static_cast<size_t>(queued) * big.size(), HostLinks::kQueueLimit);
  EXPECT_EQ(a.links->room(1, 0), 0u);
  ASSERT_TRUE(pump({&a, &b}, [&] { return b.rec.psns.size() == static_cast<size_t>(queued); }));
  EXPECT_EQ(a.links->room(1, 0), HostLinks::kQueueLimit);
  EXPECT_TRUE(a.links->send(1, 0, packet(0, big)));
}

// All queues together stay within the send budget: a second peer gets what the first left.
TEST(HostLinksTest, AllQueuesTogetherHoldAtMostTheSendBudget) {
  const int port = test_support::free_ports(3);
  ASSERT_NE(port, 0);
  const std::string text = cluster_text(port, port + 1) + "c 127.0.0.1 198.18.3.0/24 2049-3072 " +
                           std::to_string(port + 2) + "\n";
  constexpr size_t kBudget = HostLinks::kQueueLimit + (1u << 20);
  End a(text, "a", kBudget), b(text, "b"), c(text, "c");
  std::vector<uint8_t> big(host::kMaxSegment, 1);
  int to_b = 0, to_c = 0;
  while (a.links->send(1, 0, packet(static_cast<uint32_t>(to_b), big))) ++to_b;  // never polled
  while (a.links->send(2, 0, packet(static_cast<uint32_t>(to_c), big))) ++to_c;
  EXPECT_GT(a.links->queued(), kBudget);  // the last packet that was let in may overshoot
  EXPECT_LE(a.links->queued(), kBudget + host::kMaxPacketSize);
  EXPECT_LT(static_cast<size_t>(to_c) * big.size(), 2u << 20) << "c got more than was left";
  EXPECT_EQ(a.links->room(2, 0), 0u);
  ASSERT_TRUE(pump({&a, &b, &c}, [&] {
    return b.rec.psns.size() == static_cast<size_t>(to_b) &&
           c.rec.psns.size() == static_cast<size_t>(to_c);
  }));
  EXPECT_EQ(a.links->queued(), 0u);
  EXPECT_EQ(a.links->room(2, 0), HostLinks::kQueueLimit);
}

// A send queue keeps what it grew to while its connection stays busy (freeing it whenever
// the queue drained cost a steady 1 MiB stream a quarter of its speed in page faults), and
// gives it back once the connection has been quiet for a trim period.
TEST(HostLinksTest, ABusyQueueKeepsItsMemoryAndAQuietOneGivesItBack) {
  const std::string text = two_host_cluster();
  End a(text, "a"), b(text, "b");
  std::vector<uint8_t> big(host::kMaxSegment, 1);
  size_t sent = 0;
  auto burst = [&] {  // 1 MiB, then until it has all been written
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(a.links->send(1, 0, packet(0, big)));
    sent += 16;
    ASSERT_TRUE(pump({&a, &b}, [&] { return b.rec.psns.size() == sent; }));
  };
  burst();
  const size_t grown = a.links->queue_memory();
  EXPECT_GE(grown, 1u << 20);
  EXPECT_EQ(a.links->queued(), 0u);
  burst();
  EXPECT_EQ(a.links->queue_memory(), grown) << "a drained queue gave its memory back at once";
  // Quiet: the second trim after the bursts (the first still saw their peak) frees it all.
  EXPECT_TRUE(pump({&a, &b}, [&] { return a.links->queue_memory() == 0; }));
}

// Queues that were busy one after another hold at most kMemoryPerBudget x the send budget
// together, even before they are quiet for a trim period.
TEST(HostLinksTest, QueuesTogetherHoldAtMostTheirMemoryLimit) {
  const int port = test_support::free_ports(4);
  ASSERT_NE(port, 0);
  std::string text;
  for (int i = 0; i < 4; ++i)
    text += std::string(1, static_cast<char>('a' + i)) + " 127.0.0.1 198.18." +
            std::to_string(i + 1) + ".0/24 " + std::to_string(i * 1024 + 1) + "-" +
            std::to_string(i * 1024 + 1024) + " " + std::to_string(port + i) + "\n";
  constexpr size_t kBudget = 2u << 20;
  End a(text, "a", kBudget), b(text, "b"), c(text, "c"), d(text, "d");
  std::vector<uint8_t> big(host::kMaxSegment, 1);
  constexpr size_t kLimit = HostLinks::kMemoryPerBudget * kBudget + 3 * HostLinks::kQueueKeep;
  size_t peak = 0;
  for (int round = 0; round < 2; ++round) {
    for (int peer = 1; peer <= 3; ++peer) {  // fill one peer's queue, then let it drain
      End* to = peer == 1 ? &b : peer == 2 ? &c : &d;
      const size_t before = to->rec.psns.size();
      size_t n = 0;
      while (a.links->send(peer, 0, packet(0, big))) ++n;
      peak = std::max(peak, a.links->queue_memory());
      ASSERT_TRUE(pump({&a, &b, &c, &d}, [&] { return to->rec.psns.size() == before + n; }));
      EXPECT_LE(a.links->queue_memory(), kLimit) << "round " << round << " peer " << peer;
    }
  }
  EXPECT_GT(peak, kBudget) << "the queues never held more than the budget: nothing was tested";
}

TEST(HostLinksTest, APeerThatRestartsIsNoticed) {
  const std::string text = two_host_cluster();
  End a(text, "a");
  std::vector<uint8_t> one(1, 1);
  {
    End b(text, "b");
    ASSERT_TRUE(a.links->send(1, 0, packet(1, one)));
    ASSERT_TRUE(pump({&a, &b}, [&] { return b.rec.psns.size() == 1; }));
  }
  // b is gone: a's connection breaks, and reconnecting is refused (nobody listens); a new b
  // (a new incarnation) takes its place.
  EXPECT_EQ(a.rec.gone, 0);
  ASSERT_TRUE(pump({&a}, [&] {
    a.links->send(1, 0, packet(2, one));
    return a.rec.link_lost > 0 && a.rec.gone > 0;
  }));
  End b2(text, "b");
  ASSERT_TRUE(pump({&a, &b2}, [&] {
    a.links->send(1, 0, packet(3, one));
    return a.rec.restarted == 1 && !b2.rec.psns.empty();
  }));
  // Linked twice: one reconnect, and up again.
  const Link ab = links_of(*a.links).at({1, 0});
  EXPECT_EQ(ab.stats.linked, 2u);
  EXPECT_TRUE(ab.up);
}

// The path between the two ends is cut (every packet dropped, no reset, as a failed switch
// does) with bytes in flight, long enough for TCP to retransmit on its timer. TCP alone would
// wait out its doubled timer after the path returns; the link instead replaces the stalled
// connection by a probe as soon as one gets through, and both ends report the loss so that
// the QPs above resend at once. In a network namespace of its own, with an nftables rule.
TEST(HostLinksTest, AStalledConnectionIsReplacedWhenThePathReturns) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace and nftables)";
  ASSERT_NO_FATAL_FAILURE(test_support::enter_own_network());
  const int port = test_support::free_ports(2);
  ASSERT_NE(port, 0);
  End a(cluster_text(port, port + 1), "a");
  End b(cluster_text(port, port + 1), "b");
  ASSERT_NO_FATAL_FAILURE(test_support::cut_the_path_and_let_it_return(&a, &b, port));
}

}  // namespace
}  // namespace wharf::links
