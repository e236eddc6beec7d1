// Writes the seed corpora committed under tests/fuzz/corpus/ (valid control datagrams for
// fuzz_codec, small ring programs for fuzz_ring). Not part of the test run; rebuild and rerun
// after changing messages.h or the fuzz_ring input format:
//   cmake --build build --target make_fuzz_corpus && build/bin/make_fuzz_corpus tests/fuzz/corpus
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "proto/codec.h"
#include "proto/messages.h"
#include "unit/proto_message_types.h"

namespace wharf::proto {
namespace {

// Deterministic non-trivial field values.
struct Filler {
  uint64_t state;
  template <class T>
  void operator()(T& v) {
    if constexpr (std::is_integral_v<T>) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      // Mostly small values (as real messages carry), sometimes full-width.
      v = static_cast<T>((state >> 33) % 4 == 0 ? state : (state >> 40) % 300);
    } else if constexpr (std::is_array_v<T> || requires { std::tuple_size<T>::value; }) {
      for (auto& e : v) (*this)(e);
    } else {
      v.visit(*this);
    }
  }
};

// The operation a message most plausibly travels with (the codec does not interpret it).
template <class T>
uint16_t op_for() {
  auto rep = [](Op op) { return static_cast<uint16_t>(static_cast<uint16_t>(op) | kReplyBit); };
  auto req = [](Op op) { return static_cast<uint16_t>(op); };
  if constexpr (std::is_same_v<T, HelloReq>) return req(Op::kHello);
  if constexpr (std::is_same_v<T, HelloRep>) return rep(Op::kHello);
  if constexpr (std::is_same_v<T, Handle>) return rep(Op::kAllocPd);
  if constexpr (std::is_same_v<T, Empty>) return rep(Op::kDeallocPd);
  if constexpr (std::is_same_v<T, RegMrReq>) return req(Op::kRegMr);
  if constexpr (std::is_same_v<T, ReregMrReq>) return req(Op::kReregMr);
  if constexpr (std::is_same_v<T, RegMrRep>) return rep(Op::kRegMr);
  if constexpr (std::is_same_v<T, RestoreNextReq>) return req(Op::kRestoreNext);
  if constexpr (std::is_same_v<T, AllocMwReq>) return req(Op::kAllocMw);
  if constexpr (std::is_same_v<T, AllocMwRep>) return rep(Op::kAllocMw);
  if constexpr (std::is_same_v<T, McastReq>) return req(Op::kAttachMcast);
  if constexpr (std::is_same_v<T, OpenXrcdReq>) return req(Op::kOpenXrcd);
  if constexpr (std::is_same_v<T, OpenQpReq>) return req(Op::kOpenQp);
  if constexpr (std::is_same_v<T, CreateFlowReq>) return req(Op::kCreateFlow);
  if constexpr (std::is_same_v<T, ModifyWqReq>) return req(Op::kModifyWq);
  if constexpr (std::is_same_v<T, SetQpRssReq>) return req(Op::kSetQpRss);
  if constexpr (std::is_same_v<T, CreateCqReq>) return req(Op::kCreateCq);
  if constexpr (std::is_same_v<T, CreateCqRep>) return rep(Op::kCreateCq);
  if constexpr (std::is_same_v<T, ResizeCqReq>) return req(Op::kResizeCq);
  if constexpr (std::is_same_v<T, ModifyCqReq>) return req(Op::kModifyCq);
  if constexpr (std::is_same_v<T, CreateAhReq>) return req(Op::kCreateAh);
  if constexpr (std::is_same_v<T, CreateQpReq>) return req(Op::kCreateQp);
  if constexpr (std::is_same_v<T, CreateQpRep>) return rep(Op::kCreateQp);
  if constexpr (std::is_same_v<T, ModifyQpReq>) return req(Op::kModifyQp);
  if constexpr (std::is_same_v<T, QueryQpRep>) return rep(Op::kQueryQp);
  if constexpr (std::is_same_v<T, CreateSrqReq>) return req(Op::kCreateSrq);
  if constexpr (std::is_same_v<T, CreateSrqRep>) return rep(Op::kCreateSrq);
  if constexpr (std::is_same_v<T, PostSrqOpsReq>) return req(Op::kPostSrqOps);
  if constexpr (std::is_same_v<T, PostSrqOpsRep>) return rep(Op::kPostSrqOps);
  if constexpr (std::is_same_v<T, ModifySrqReq>) return req(Op::kModifySrq);
  if constexpr (std::is_same_v<T, QuerySrqRep>) return rep(Op::kQuerySrq);
  if constexpr (std::is_same_v<T, RegisterContainerReq>) return req(Op::kRegisterContainer);
  if constexpr (std::is_same_v<T, RegisterContainerRep>) return rep(Op::kRegisterContainer);
  if constexpr (std::is_same_v<T, UnregisterContainerReq>) return req(Op::kUnregisterContainer);
  if constexpr (std::is_same_v<T, RouterInfoRep>) return rep(Op::kRouterInfo);
  if constexpr (std::is_same_v<T, DumpResourcesRep>) return rep(Op::kDumpResources);
  return 0;
}

bool write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

template <class T>
std::vector<uint8_t> encoded(const T& msg) {
  std::vector<uint8_t> buf(kMaxMessage);
  buf.resize(encode(msg, buf.data(), buf.size()));
  return buf;
}

bool write_codec_corpus(const std::string& dir) {
  bool ok = true;
  uint32_t seq = 1;
  test_support::for_each_type(test_support::AllMessages{}, [&]<class T>() {
    Header h;
    h.op = op_for<T>();
    h.seq = seq++;
    T body{};
    Filler f{seq};
    f(body);
    std::vector<uint8_t> bytes = encoded(h);
    const std::vector<uint8_t> b = encoded(body);
    bytes.insert(bytes.end(), b.begin(), b.end());
    ok &= write_file(dir + "/" + test_support::Spec<T>::kName, bytes);
  });
  // An error reply carries no body.
  Header err;
  err.op = static_cast<uint16_t>(Op::kCreateQp) | kReplyBit;
  err.seq = 77;
  err.status = 22;  // EINVAL
  ok &= write_file(dir + "/error_reply", encoded(err));
  // Event datagrams have no header.
  AsyncEventMsg ev;
  ev.event_type = 1;  // IBV_EVENT_QP_FATAL
  ev.handle = 5;
  ok &= write_file(dir + "/bare_AsyncEventMsg", encoded(ev));
  CqEventMsg cq;
  cq.cq = 3;
  ok &= write_file(dir + "/bare_CqEventMsg", encoded(cq));
  return ok;
}

// fuzz_ring programs: [log2 capacity][slot size selector] then operations (see fuzz_ring.cc).
bool write_ring_corpus(const std::string& dir) {
  enum : uint8_t {
    kPush = 0,
    kReserve,
    kPop,
    kPeek,
    kBadProducer,
    kBadConsumer,
    kScribble,
    kCounts,
    kBurst
  };
  const std::vector<std::pair<const char*, std::vector<uint8_t>>> seeds = {
      {"fill_and_drain_cap4",
       {2, 0, kPush, kPush, kPush, kPush, kPush, kCounts, kPop, kPop, kPop, kPop, kPop, kCounts}},
      {"ping_pong_cap1",
       {0, 1, kPush, kPop, kPush, kPop, kPush, kPeek, kPop, kPush, kReserve, kPop, kCounts}},
      {"burst_cap256", {8, 2, kBurst, 255, kCounts, kBurst, 200, kCounts}},
      {"producer_overclaims_cap2",
       {1, 0, kPush, kPop, kBadProducer, 1, 3, kPeek, kCounts, kBadProducer, 3, kPeek}},
      {"consumer_runs_ahead_cap2",
       {1, 0, kPush, kPush, kPush, kBadConsumer, 1, 3, kPush, kCounts, kBadConsumer, 3, kPush}},
      {"near_uint32_max_cap8",
       {3, 3,     kBurst,       20, kBadProducer, 2,    0,    kPeek, kBadConsumer, 2,
        5, kPush, kBadProducer, 0,  0xff,         0xff, 0xff, 0x7f,  kPeek,        kCounts}},
      {"scribbled_slot_cap4", {2, 1, kPush, kPush, kScribble, 0, 3, 0xee, kPop, kPop, kPop}},
  };
  bool ok = true;
  for (const auto& [name, bytes] : seeds) ok &= write_file(dir + "/" + name, bytes);
  return ok;
}

}  // namespace
}  // namespace wharf::proto

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-root>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  for (const char* sub : {"", "/fuzz_codec", "/fuzz_ring"}) {
    if (mkdir((root + sub).c_str(), 0755) != 0 && errno != EEXIST) {
      std::perror((root + sub).c_str());
      return 1;
    }
  }
  if (!wharf::proto::write_codec_corpus(root + "/fuzz_codec") ||
      !wharf::proto::write_ring_corpus(root + "/fuzz_ring")) {
    std::fprintf(stderr, "cannot write the corpus under %s\n", root.c_str());
    return 1;
  }
  return 0;
}
