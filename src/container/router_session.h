// A container's registration session with the router (wharf-run's, and wharf-scala's for the
// tenant networks it puts on a router): registers the container with its network namespace
// and keeps the socket open for the container's life; the router treats the socket closing
// as unregistration. Errors are printed prefixed with the program's name. Messages:
// proto::Op::kRegisterContainer / kUnregisterContainer.
// Also wharf-cni's registrations, which the router holds for a runtime's sandbox after the
// session has gone (kHoldContainer, kReleaseContainer, kHeldContainer); those calls print
// nothing and return what happened.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "proto/router_client.h"

namespace wharf::container {

// A registration held for a sandbox, as the router holds it.
struct HeldContainer {
  std::string sandbox;  // the runtime's ID of the pod sandbox (CNI_CONTAINERID)
  std::string tenant, network, name;
  uint32_t vip = 0;        // host order
  uint16_t lid = 0;        // held: the orchestrator's or 0 (any); answered: the container's
  uint64_t netns_ino = 0;  // answered: the inode of the namespace the router holds
};

class RouterSession {
 public:
  // Connects a SOCK_SEQPACKET socket to the router. Prints an error and returns false on failure.
  [[nodiscard]] bool connect(const std::string& socket_path);
  // The same without printing: 0 or the errno.
  [[nodiscard]] int connect_quietly(const std::string& socket_path);

  // Registers container `name` of `tenant` and `network` ("" without an orchestrator) with
  // `vip` (host order) and LID `want_lid` (the orchestrator's; 0: the router picks), passing
  // netns_fd. On success stores the container's LID in *lid. Prints the router's errno (or a
  // protocol error) on failure.
  [[nodiscard]] bool register_container(const std::string& tenant, const std::string& network,
                                        const std::string& name, uint32_t vip, uint16_t want_lid,
                                        int netns_fd, uint16_t* lid);
  // The same without printing, waiting at most timeout_ms: 0, the router's errno, or -1 when
  // no answer came (the session is then closed).
  [[nodiscard]] int register_container_quietly(const std::string& tenant,
                                               const std::string& network, const std::string& name,
                                               uint32_t vip, uint16_t want_lid, int netns_fd,
                                               uint16_t* lid, int timeout_ms);

  // Who the router is: its host name (empty when it runs without --host), node GUID and link
  // layer. False after printing why.
  struct Info {
    std::string host;
    uint64_t node_guid = 0;
    uint8_t link_layer = 0;
  };
  [[nodiscard]] bool router_info(Info* info);
  // The same without printing, waiting at most timeout_ms: 0, the router's errno, or -1 when
  // no answer came.
  [[nodiscard]] int router_info_quietly(Info* info, int timeout_ms = 10000);

  // Asks the router to forget the container and waits briefly for its answer. Quiet when the
  // router has gone away (closing the socket unregisters as well).
  void unregister_container(const std::string& name);

  // Held registrations. Each returns 0, the router's errno, or -1 when no answer came (the
  // connection broke or timed out). hold: c's sandbox, names, vip and lid with netns_fd, the
  // container's LID in *lid. release: ENOENT when the sandbox holds none. held: fills *c
  // (sandbox given) from the router's record.
  int hold_container(const HeldContainer& c, int netns_fd, uint16_t* lid);
  int release_held_container(const std::string& sandbox);
  int held_container(HeldContainer* c);

  // The connected socket; readable with 0 bytes once the router closes it.
  int fd() const { return client_.fd(); }
  // Closes the socket without a word to the router (which unregisters what it registered).
  void close() { client_.close(); }
  // The router's pid (SO_PEERCRED), or -1.
  pid_t router_pid() const;

 private:
  // One request and its reply within timeout_ms. Returns the router's status (0 or an errno),
  // or -1 after printing (unless quiet) why the connection broke.
  template <class Req, class Rep>
  int call(proto::Op op, const Req& req, const int* fds, int nfds, int timeout_ms, bool quiet,
           Rep* rep);

  // kRegisterContainer: the router's status, or -1 (printed unless quiet).
  int register_call(const std::string& tenant, const std::string& network, const std::string& name,
                    uint32_t vip, uint16_t want_lid, int netns_fd, int timeout_ms, bool quiet,
                    uint16_t* lid);

  proto::RouterClient client_;
  std::string path_;
};

}  // namespace wharf::container
