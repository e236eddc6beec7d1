// The router's secret for resumed sessions (HelloReq::resume): QPNs and MR keys are host-wide,
// so a library that restores its objects after a router restart must prove each number was
// its container's. The router gives a proof with each number it hands out, a keyed hash of
// the number and the container's network namespace, and checks it on restore. The key
// outlives the router process in a file beside its socket (mode 0600), made at the first
// start; whoever can read it can forge proofs, as whoever can replace the router binary can.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace wharf::router {

// What a proof is of: the same number means different things in each.
enum class ProofKind : uint8_t { kQpn = 1, kMrKey = 2 };

class ResumeKey {
 public:
  // Reads the key from `path`, making the file with a fresh random key if it does not exist.
  // Returns 0 or an errno (EINVAL for a file of the wrong size or mode).
  int load_or_create(const std::string& path);
  // The proof of `number` for the container of namespace `netns_ino`; 0 without a key.
  uint64_t proof(ProofKind kind, uint32_t number, uint64_t netns_ino) const;
  bool valid() const { return loaded_; }

 private:
  std::array<uint8_t, 32> key_{};
  bool loaded_ = false;
};

}  // namespace wharf::router
