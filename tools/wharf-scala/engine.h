// wharf-scala's traffic engine: opens one verbs device on each side (a Wharf router, through
// its socket, or an RNIC by name; the remote one possibly on another host, through
// `wharf-scala serve`), and for each point of a sweep builds the QPs, CQs, SRQs and registered
// memory the point names (each side its half, half.h), drives traffic both ways for a while
// and measures it. Only the public verbs API: it runs on wharf0, mlx5, rxe alike.
//
// A point: `ql` QP pairs carry work from the local side to the remote, `qr` pairs from the
// remote to the local; each QP keeps `depth` work requests in flight. What is measured is what
// the two devices carry between them, both ways: payload bandwidth and message rate (counted
// where the payload lands for UD, whose sender does not know), and every work request's time
// from posting to its completion, p50 and p99. (Counting one direction only would make the
// other's QPs look like a wall: they take their share of a saturated path.)
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenant_networks.h"

namespace wharf::scala {

enum class Opcode { kSend, kWrite, kRead, kAtomic };

struct PointSpec {
  uint32_t ql = 1, qr = 1;
  uint32_t size = 4096;  // bytes; atomics move 8
  Opcode opcode = Opcode::kWrite;
  ibv_qp_type qp_type = IBV_QPT_RC;
  bool shared_cq = true;  // one CQ per side and thread; else one per QP
  bool srq = false;       // receives from one SRQ per side and thread
  bool inline_data = false;
  uint32_t mrs = 1;  // registrations per side the work spreads over
  uint64_t mr_size = 65536;
  // Tenant networks on each router, the engine's own included (tenant_networks.h): more than 1
  // needs Wharf routers and root.
  uint32_t networks = 1;
  // Match-action rules on each side's device: flow-steering rules (ibv_create_flow, one UDP
  // port each) on RAW_PACKET QPs of their own, as an eSwitch holds a container network's
  // rules. More than 0 needs a device with flow steering, and CAP_NET_RAW.
  uint32_t rules = 0;
};

struct RunOptions {
  // Counting starts once every flow has completed a work request, at least warmup_s and at
  // most warmup_max_s after the start.
  double warmup_s = 0.1;
  double warmup_max_s = 2;
  double measure_s = 0.3;
  uint32_t depth = 2;    // work requests in flight per QP
  uint32_t threads = 1;  // each drives a share of the QPs, with CQs and SRQs of its own
  // Sleep on completion events when the CQs are empty instead of polling: on a machine with
  // fewer cores than busy threads (the routers poll too) polling takes the cores the work
  // needs.
  bool events = true;
};

struct PointResult {
  bool ok = false;
  std::string error;
  double bw_gbps = 0, mrate_mps = 0;  // both directions
  double lat_p50_us = 0, lat_p99_us = 0;

  static PointResult failure(std::string why) {
    PointResult r;
    r.error = std::move(why);
    return r;
  }
};

struct OpenDevice;
class AgentClient;

class Engine {
 public:
  // local: a Wharf router's socket path (a Unix socket on disk: opened through WHARF_ROUTER,
  // so the process must run with Wharf's libibverbs), or a device name. remote: the same, or
  // the address of a `wharf-scala serve` on another host (agent.h), then connected as
  // `agent` (AgentClient::connect: before the process moves into a namespace of its own,
  // which has no route to it). nullptr and *error on failure.
  static std::unique_ptr<Engine> open(const std::string& local, const std::string& remote,
                                      std::unique_ptr<AgentClient> agent, std::string* error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // What the two ends are, for the report: "wharf0 (router /run/...)", "mlx5_0".
  const std::string& local_name() const;
  const std::string& remote_name() const;
  // The work requests a QP of both devices takes, bounding depth.
  uint32_t max_qp_wr() const;

  PointResult run(const PointSpec& spec, const RunOptions& opts);

  // The dimensions these two ends cannot vary, with the reason: "networks" unless both are
  // Wharf routers this process reaches and it runs as root; "rules" unless both devices steer
  // flows (an InfiniBand port has no Ethernet frames to steer; RAW_PACKET QPs need CAP_NET_RAW).
  struct Fixed {
    std::string dimension, why;
  };
  const std::vector<Fixed>& fixed_dimensions() const { return fixed_; }

 private:
  Engine() = default;
  std::unique_ptr<OpenDevice> local_, remote_;  // remote_: without an agent
  std::unique_ptr<AgentClient> agent_;
  std::string remote_name_;
  NamespacePool namespaces_;
  // For router endpoints only; one when both ends are the same router.
  std::vector<std::unique_ptr<TenantNetworks>> networks_;
  std::vector<Fixed> fixed_;
};

}  // namespace wharf::scala
