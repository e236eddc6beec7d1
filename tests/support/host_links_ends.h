// Router ends of host links (links/host_links.h) on loopback for tests (support/two_hosts.h
// makes their cluster): a handler that records what it is told, and a loop that polls ends until a
// condition holds.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "links/host_links.h"
#include "support/two_hosts.h"

namespace wharf::test_support {

struct Recorder : links::HostLinks::Handler {
  std::vector<uint32_t> psns;
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<const uint8_t*> payload_at;  // where each payload was when it came
  // Set: the answer to payload_destination (else nullptr, as the Handler's default).
  std::function<uint8_t*(const proto::host::Packet&)> place;
  int link_lost = 0;
  int restarted = 0;
  int gone = 0;
  void on_packet(int, const proto::host::Packet& p) override {
    psns.push_back(p.hdr.psn);
    payloads.emplace_back(p.payload, p.payload + p.payload_len);
    payload_at.push_back(p.payload);
  }
  uint8_t* payload_destination(int, const proto::host::Packet& p) override {
    return place ? place(p) : nullptr;
  }
  void on_link_lost(int) override { ++link_lost; }
  void on_peer_restarted(int) override { ++restarted; }
  void on_peer_gone(int) override { ++gone; }
};

// Host `name` of the cluster `text` describes, listening; its links authenticate with `tls`
// if given (it must outlive the End).
struct End {
  links::StaticCluster dir;
  Recorder rec;
  std::unique_ptr<links::HostLinks> links;
  End(const std::string& text, const char* name, size_t budget = links::HostLinks::kSendBudget,
      const links::LinkTls* tls = nullptr) {
    EXPECT_EQ(dir.load(text, name), "");
    links = std::make_unique<links::HostLinks>(&dir, 0x1234, &rec, budget, tls);
    EXPECT_EQ(links->start(), 0);
  }
};

inline proto::host::Packet packet(uint32_t psn, const std::vector<uint8_t>& payload) {
  namespace host = proto::host;
  host::Packet p;
  p.hdr.opcode = host::opcode_of(host::kRc, host::kSendOnly);
  p.hdr.dest_qpn = 0x100;
  p.hdr.src_qpn = 0x101;
  p.hdr.psn = psn;
  p.payload = payload.data();
  p.payload_len = static_cast<uint32_t>(payload.size());
  EXPECT_TRUE(host::finish_packet(&p));
  return p;
}

// Polls `ends` until done() (true) or for at most 5 s (false).
template <class Done>
bool pump(std::vector<End*> ends, Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    for (End* e : ends) e->links->poll();
  }
  return true;
}

// Runs `cmd` with /bin/sh; true if it exited 0.
inline bool run(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

// Polls the ends for `span`, whatever happens.
inline void pump_for(std::vector<End*> ends, std::chrono::milliseconds span) {
  auto end = std::chrono::steady_clock::now() + span;
  while (std::chrono::steady_clock::now() < end)
    for (End* e : ends) e->links->poll();
}

// Moves this process into a network namespace of its own with loopback up, where
// cut_the_path_and_let_it_return can drop packets with nftables. Needs root.
inline void enter_own_network() {
  ASSERT_EQ(unshare(CLONE_NEWNET), 0) << "unshare(CLONE_NEWNET)";
  ASSERT_TRUE(run("ip link set lo up"));
  ASSERT_TRUE(run("nft --version > /dev/null")) << "nftables missing: scripts/install-deps.sh";
}

// With a link from a to b up (ports `port` and `port + 1`), the path between them is cut
// (every packet dropped, no reset, as a failed switch does) with bytes in flight, long enough
// for TCP to retransmit on its timer; then it returns. Both ends must report the loss once,
// and a packet sent after it must arrive (on the connection that replaced the stalled one).
inline void cut_the_path_and_let_it_return(End* a, End* b, int port) {
  std::vector<uint8_t> one(100, 1);
  ASSERT_TRUE(a->links->send(1, 0, packet(1, one)));
  ASSERT_TRUE(pump({a, b}, [&] { return b->rec.psns.size() == 1; }));

  const std::string ports = "{ " + std::to_string(port) + ", " + std::to_string(port + 1) + " }";
  // Dropped on the way in: to the sender the packets left (on the way out, the kernel would
  // see the drop and keep them unsent, a different state).
  ASSERT_TRUE(
      run("nft add table inet cut && nft add chain inet cut in "
          "'{ type filter hook input priority 0; policy accept; }' && "
          "nft add rule inet cut in tcp dport " +
          ports +
          " drop && "
          "nft add rule inet cut in tcp sport " +
          ports + " drop"));
  ASSERT_TRUE(a->links->send(1, 0, packet(2, one)));
  // TCP's first retransmission timeout is at least 200 ms; probes start after it and fail.
  pump_for({a, b}, std::chrono::milliseconds(1000));
  EXPECT_EQ(a->rec.link_lost, 0) << "replaced while the path was still cut";
  EXPECT_EQ(b->rec.psns.size(), 1u);

  ASSERT_TRUE(run("nft delete table inet cut"));
  ASSERT_TRUE(pump({a, b}, [&] { return a->rec.link_lost > 0 && b->rec.link_lost > 0; }))
      << "the stalled connection was not replaced (a lost " << a->rec.link_lost << ", b lost "
      << b->rec.link_lost << ")";
  EXPECT_EQ(a->rec.link_lost, 1);
  EXPECT_EQ(b->rec.link_lost, 1);
  // What the QPs resend now goes on the new connection.
  ASSERT_TRUE(a->links->send(1, 0, packet(3, one)));
  ASSERT_TRUE(pump({a, b}, [&] { return b->rec.psns.back() == 3; }));
  EXPECT_EQ(a->rec.restarted + b->rec.restarted + a->rec.gone + b->rec.gone, 0);
}

}  // namespace wharf::test_support
