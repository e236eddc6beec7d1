// wharf-scala between two hosts: `wharf-scala serve` runs the remote half of every point on
// its own device, and `sweep --remote HOST:PORT` drives it over one TCP connection.
//
// The exchange for a point (agent_wire.h's messages, one JSON object a frame):
//   sweep -> serve  {"op":"point", "point":{...}}     serve builds its half
//   serve -> sweep  {"info":{...}} | {"error":"..."}
//   sweep -> serve  {"op":"connect", "info":{...}}    serve connects its QPs to sweep's
//   serve -> sweep  {} | {"error":"..."}
//   sweep -> serve  {"op":"start"}                    both drive their flows
//   serve -> sweep  {"op":"warm"}                     serve's threads are warm
//   sweep -> serve  {"op":"go"}                       both count for measure_s from here
//   serve -> sweep  {"tally":{...}}
//   sweep -> serve  {"op":"end"}                      QPs first, then everything else
//   serve -> sweep  {}
// after a first {"op":"hello","version":1} answered by {"version", "device", "max_qp_wr",
// "no_rules"}. The agent serves one sweep at a time; it trusts nothing it reads (agent_wire.h)
// and has no authentication: run it on a lab network, bound to the address the sweep uses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "half.h"

namespace wharf::scala {

// Whether `endpoint` is HOST:PORT (an agent), rather than a socket path or a device name.
bool is_agent_address(const std::string& endpoint);

class AgentClient {
 public:
  // Connects to the agent at HOST:PORT and greets it. nullptr and *error on failure.
  static std::unique_ptr<AgentClient> connect(const std::string& address, std::string* error);

  const std::string& device_name() const { return device_; }
  uint32_t max_qp_wr() const { return max_qp_wr_; }
  const std::string& no_rules() const { return no_rules_; }  // "" when its device steers flows

  // Runs a point between `local` (built, side 0) and the agent's half.
  PointResult run(Half& local, const PointSpec& spec, const RunOptions& opts);

 private:
  AgentClient() = default;
  std::string address_;
  UniqueFd sock_;
  std::string device_;
  uint32_t max_qp_wr_ = 0;
  std::string no_rules_;
};

// A TCP socket listening at ADDR:PORT; invalid with *error on failure.
UniqueFd listen_at(const std::string& address, std::string* error);

// `wharf-scala serve`: answers sweeps arriving on `listener` (listening at `address`) with
// `device` (a router's socket or an RNIC's name), one at a time; after the first if `once`.
// Returns the exit status.
int serve(const std::string& device, const std::string& address, int listener, bool once);

}  // namespace wharf::scala
