// One side of a sweep point: what one device builds for it and the traffic it drives. A point
// is two halves, the local device's (side 0) and the remote's (side 1), in one process (two
// devices of this host, two routers) or in two (the remote half in `wharf-scala serve` on
// another host). They meet through what each tells the other (HalfInfo), as two RDMA
// applications exchange QPNs, addresses and keys before they connect.
//
// Flow i (0 <= i < ql + qr) is one QP pair; side 0 sends on flows 0 .. ql-1, side 1 on the
// rest. A half holds its end of every flow: the requester's QP of the flows it sends, the
// responder's of the others.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine.h"

namespace wharf::scala {

// What a half tells the other before they connect.
struct HalfInfo {
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  uint8_t mtu = IBV_MTU_1024;  // the port's active MTU (enum ibv_mtu)
  struct Mr {
    uint64_t addr = 0;
    uint32_t rkey = 0;
  };
  std::vector<Mr> mrs;        // the point's registrations, in order
  std::vector<uint32_t> qps;  // per flow, this half's QP
};

// The start of the measured interval, shared by the threads of every half in this process:
// counting starts once every thread is warm (and, between two processes, the other's too).
class Meter {
 public:
  explicit Meter(uint32_t threads) : threads_(threads) {}
  // A thread is warm (every flow of its own completed a work request, or its warm-up ran
  // out). When start_when_warm, the last one starts the interval.
  void thread_warm(uint64_t now, bool start_when_warm);
  bool all_warm() const { return warm_.load() == threads_; }
  void start(uint64_t now) { measure_from_.store(now); }
  uint64_t measure_from() const { return measure_from_.load(std::memory_order_relaxed); }
  // Ends every thread's loop (a failure, or the other process gone).
  void abort() { aborted_ = true; }
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }

 private:
  const uint32_t threads_;
  std::atomic<uint32_t> warm_{0};
  std::atomic<uint64_t> measure_from_{UINT64_MAX};
  std::atomic<bool> aborted_{false};
};

// What one thread measured.
struct Tally {
  uint64_t bytes = 0, messages = 0;
  std::vector<uint64_t> latencies;  // ns
  double weight = 1;  // the work requests each latency stands for (a sample of another's)
  std::string error;
};

class Half {
 public:
  struct Device {
    ibv_context* ctx = nullptr;
    ibv_device_attr attr{};
    ibv_port_attr port{};
    ibv_gid gid{};
    std::string name;
  };

  // side: 0 local, 1 remote. dev outlives the half.
  Half(const Device* dev, uint32_t side, const PointSpec& spec, const RunOptions& opts);
  ~Half();
  Half(const Half&) = delete;
  Half& operator=(const Half&) = delete;

  // Builds the PD, MRs, CQs, SRQs, the rules and this half's QP of every flow. "" or why not.
  std::string build();
  HalfInfo info() const;
  // Connects every QP to the peer's (RTS), makes the AHs of UD flows it sends and posts the
  // first receives of SEND flows it answers. "" or why not.
  std::string connect(const HalfInfo& peer);
  // Destroys the QPs, first of all: nothing this half holds is then in flight.
  void destroy_qps();

  // Thread `thread`'s share of the flows (i % threads == thread), for drive():
  // fills the send windows of the flows it sends; 0 or the error of ibv_post_send.
  int start_sending(uint32_t thread);
  // Takes completions from its CQs and reposts: the number taken, or -1 with tally->error
  // set. Counts into tally when `counting`; *warmed grows by the flows that completed their
  // first work request.
  int poll(uint32_t thread, uint64_t now, bool counting, Tally* tally, size_t* warmed);
  size_t flows_sending(uint32_t thread) const;
  // Arms its CQs for an event; the fd that becomes readable; takes the events that came.
  void arm(uint32_t thread);
  int event_fd(uint32_t thread) const;
  void take_events(uint32_t thread);

  // Whether a device can hold a flow-steering rule: "" or why not.
  static std::string probe_rules(const Device& dev);

  struct Flow;

 private:
  bool sends(size_t flow) const { return (flow < spec_.ql) == (side_ == 0); }
  ibv_cq* cq_for(size_t flow) const;
  // The receives a QP answering SENDs keeps posted (kRecvWindows windows, as the device allows).
  uint32_t recv_window() const;
  bool counts_at_receiver() const { return spec_.qp_type == IBV_QPT_UD; }
  int post_send(Flow& f, size_t flow, uint32_t slot);
  int post_recv(Flow& f, size_t flow);
  std::string install_rules();
  void destroy();

  const Device* dev_;
  uint32_t side_;
  PointSpec spec_;
  RunOptions opts_;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t*> blocks_;  // mrs blocks of mr_size bytes
  std::vector<ibv_mr*> mrs_;
  std::vector<uint8_t> grh_;  // where UD receives put their GRHs
  ibv_mr* grh_mr_ = nullptr;
  std::vector<ibv_comp_channel*> channels_;  // per thread, with RunOptions::events
  std::vector<ibv_cq*> cqs_;
  std::vector<ibv_srq*> srqs_;  // per thread, or empty
  std::vector<ibv_ah*> ahs_;
  ibv_cq* rule_cq_ = nullptr;  // the match-action rules (PointSpec::rules) and their QPs
  std::vector<ibv_qp*> rule_qps_;
  std::vector<ibv_flow*> rules_;
  std::vector<Flow> flows_;
  std::vector<HalfInfo::Mr> peer_mrs_;
};

// One thread's loop over its share of every half in this process: keeps the windows full,
// takes the completions, sleeps on completion events when nothing completes (RunOptions::
// events). It is warm once every flow it sends has completed a work request, not before
// warmup_s after `start` nor after warmup_max_s (a flow that never completes is the
// measurement's business);
// it ends measure_s after the meter starts, or when the meter is aborted. start_when_warm:
// the last warm thread starts the meter (one process holds both halves).
void drive(const std::vector<Half*>& halves, uint32_t thread, const RunOptions& opts,
           uint64_t start, bool start_when_warm, Meter* meter, Tally* tally);

// p50 and p99 of the merged tallies, bandwidth and message rate over measure_s.
PointResult summarize(std::vector<Tally>& tallies, double measure_s);

}  // namespace wharf::scala
