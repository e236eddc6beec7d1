// wharf-device-plugin end to end: the real binary, serving a real wharfd, with the test as its
// kubelet. The fake kubelet serves Registration on <dir>/kubelet.sock and records what comes,
// and calls the plugin's DevicePlugin service as a kubelet does. Each test starts its own
// wharfd and plugin in a fresh directory; both die with the test (PR_SET_PDEATHSIG). Needs
// root (the plugin makes device nodes).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/unique_fd.h"
#include "container/device_view.h"
#include "container/router_session.h"
#include "container/sysfs_tree.h"
#include "deviceplugin_v1beta1.grpc.pb.h"
#include "support/temp_dir.h"

extern char** environ;

namespace wharf {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The longest any awaited event may take: the plugin probes the router every 2 s and looks
// for its socket every second.
constexpr auto kBound = 10s;
constexpr auto kPoll = 20ms;
constexpr int kDefaultCount = 64;
constexpr const char* kResource = "wharf.test/rdma";
constexpr const char* kEndpoint = "wharf-test.sock";

// Polls `done` until it holds or kBound passes.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + kBound;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// True when something accepts connections on the unix socket at `path`.
bool accepts_connections(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return fd.valid() &&
         ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A program the test runs, its output in `log`. SIGKILLed and reaped when the object goes if
// it still runs; it dies with the test's thread too.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {  // only async-signal-safe calls from here on
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      const int in = ::open("/dev/null", O_RDONLY);
      if (out < 0 || in < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
        ::_exit(127);
      ::close_range(3, ~0u, 0);  // the test's sockets must not outlive it in the child
      ::execve(argv[0], argv.data(), environ);
      ::_exit(127);
    }
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // The wait status once the child exits within kBound; nullopt if it still runs.
  std::optional<int> wait_exit() {
    std::optional<int> status;
    eventually([&] {
      int s = 0;
      if (::waitpid(pid_, &s, WNOHANG) != pid_) return false;
      status = s;
      pid_ = 0;
      return true;
    });
    return status;
  }

 private:
  pid_t pid_ = -1;
};

// ---- the fake kubelet ----

struct Registration {
  v1beta1::RegisterRequest request;
  bool plugin_listening = false;  // the endpoint accepted connections when Register came
};

// What the kubelet has been told, shared by its successive servers.
class RegistrationLog {
 public:
  void add(Registration r) {
    const std::lock_guard lock(mu_);
    registrations_.push_back(std::move(r));
    added_.notify_all();
  }
  // All registrations once there are at least `n` (within kBound), else those there are.
  std::vector<Registration> wait_for(size_t n) {
    std::unique_lock lock(mu_);
    added_.wait_for(lock, kBound, [&] { return registrations_.size() >= n; });
    return registrations_;
  }

 private:
  std::mutex mu_;
  std::condition_variable added_;
  std::vector<Registration> registrations_;
};

class RegistrationService final : public v1beta1::Registration::Service {
 public:
  RegistrationService(std::string dir, RegistrationLog* log) : dir_(std::move(dir)), log_(log) {}
  grpc::Status Register(grpc::ServerContext* /*context*/, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* /*response*/) override {
    log_->add({*request, accepts_connections(dir_ + "/" + request->endpoint())});
    return grpc::Status::OK;
  }

 private:
  const std::string dir_;
  RegistrationLog* log_;
};

// Serves Registration on <dir>/kubelet.sock while started; a kubelet's restart is stop(),
// deleting the plugins' sockets, start().
class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir) : dir_(std::move(dir)) {}
  ~FakeKubelet() { stop(); }

  bool start() {
    service_ = std::make_unique<RegistrationService>(dir_, &log_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket(), grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    return server_ != nullptr;
  }
  void stop() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
    service_.reset();
    ::unlink(socket().c_str());
  }

  std::string socket() const { return dir_ + "/kubelet.sock"; }
  RegistrationLog& log() { return log_; }

 private:
  const std::string dir_;
  RegistrationLog log_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;
};

// A ListAndWatch stream read on a thread of its own.
class DeviceWatch {
 public:
  explicit DeviceWatch(v1beta1::DevicePlugin::Stub* stub) {
    thread_ = std::thread([this, stub] {
      const std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader =
          stub->ListAndWatch(&context_, v1beta1::Empty());
      v1beta1::ListAndWatchResponse list;
      while (reader->Read(&list)) {
        const std::lock_guard lock(mu_);
        lists_.push_back(list);
        changed_.notify_all();
      }
      reader->Finish();
      const std::lock_guard lock(mu_);
      ended_ = true;
      changed_.notify_all();
    });
  }
  ~DeviceWatch() {
    context_.TryCancel();
    thread_.join();
  }
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  // The index of the first list from `from` on that `want` holds for, once it came within
  // kBound.
  std::optional<size_t> wait_for_list(
      const std::function<bool(const v1beta1::ListAndWatchResponse&)>& want, size_t from = 0) {
    std::optional<size_t> found;
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, kBound, [&] {
      for (size_t i = from; i < lists_.size() && !found; ++i)
        if (want(lists_[i])) found = i;
      return found.has_value();
    });
    return found;
  }
  // True once the plugin ended the stream, within kBound.
  bool wait_for_end() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kBound, [&] { return ended_; });
  }

 private:
  grpc::ClientContext context_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<v1beta1::ListAndWatchResponse> lists_;
  bool ended_ = false;
  std::thread thread_;  // last: it starts once the rest is made
};

// True when `list` is wharf-0 ... wharf-<count - 1>, each with `health`.
bool all_devices(const v1beta1::ListAndWatchResponse& list, const std::string& health,
                 int count = kDefaultCount) {
  if (list.devices_size() != count) return false;
  for (int i = 0; i < count; ++i) {
    const v1beta1::Device& d = list.devices(i);
    if (d.id() != "wharf-" + std::to_string(i) || d.health() != health) return false;
  }
  return true;
}

std::unique_ptr<grpc::ClientContext> bounded_context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kBound);
  return context;
}

// ---- the fixture: a wharfd, the fake kubelet and the plugin, registered ----

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the plugin makes device nodes";
    ASSERT_FALSE(dir_.path().empty());
    const std::string lib = dir_.path() + "/lib";
    ASSERT_TRUE(std::filesystem::create_directory(lib));
    for (const char* name : {"libibverbs.so.1", "librdmacm.so.1"})
      std::ofstream(lib + "/" + name) << "";
    start_router();
    ASSERT_TRUE(kubelet_.start());
    start_plugin();
    ASSERT_EQ(kubelet_.log().wait_for(1).size(), 1u) << "no Register within the bound";
    stub_ = plugin_stub();
  }

  void TearDown() override {
    if (HasFailure() && !dir_.path().empty()) {
      std::fprintf(stderr, "---- wharf-device-plugin's log:\n%s---- wharfd's log:\n%s",
                   read_file(log("plugin")).c_str(), read_file(log("wharfd")).c_str());
    }
  }

  // Starts wharfd on router_socket() and waits until it answers, taking its node GUID.
  void start_router() {
    router_ = std::make_unique<Child>(
        std::vector<std::string>{WHARFD_PATH, "--socket", router_socket()}, log("wharfd"));
    ASSERT_TRUE(router_->started());
    ASSERT_TRUE(eventually([&] {
      container::RouterSession session;
      container::RouterSession::Info info;
      if (session.connect_quietly(router_socket()) != 0 || !session.router_info(&info))
        return false;
      node_guid_ = info.node_guid;
      return true;
    })) << "wharfd does not answer on "
        << router_socket();
  }

  void start_plugin(const std::vector<std::string>& more_args = {}) {
    std::vector<std::string> argv{WHARF_DEVICE_PLUGIN_PATH,
                                  "--kubelet-dir",
                                  dir_.path(),
                                  "--state-dir",
                                  state(),
                                  "--router",
                                  router_socket(),
                                  "--lib-dir",
                                  dir_.path() + "/lib",
                                  "--resource",
                                  kResource,
                                  "--endpoint",
                                  kEndpoint,
                                  "--mount-sysfs"};
    argv.insert(argv.end(), more_args.begin(), more_args.end());
    plugin_ = std::make_unique<Child>(argv, log("plugin"));
    ASSERT_TRUE(plugin_->started());
  }

  std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin_stub() const {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + plugin_socket(), grpc::InsecureChannelCredentials()));
  }

  std::string router_socket() const { return dir_.path() + "/wharfd.sock"; }
  std::string plugin_socket() const { return dir_.path() + "/" + kEndpoint; }
  std::string state() const { return dir_.path() + "/state"; }
  std::string log(const std::string& program) const { return dir_.path() + "/" + program + ".log"; }

  test_support::TempDir dir_{"wharf-dp"};
  FakeKubelet kubelet_{dir_.path()};
  std::unique_ptr<Child> router_;
  std::unique_ptr<Child> plugin_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  uint64_t node_guid_ = 0;
};

void expect_registration(const Registration& r) {
  EXPECT_EQ(r.request.version(), "v1beta1");
  EXPECT_EQ(r.request.endpoint(), kEndpoint);
  EXPECT_EQ(r.request.resource_name(), kResource);
  ASSERT_TRUE(r.request.has_options());
  EXPECT_FALSE(r.request.options().pre_start_required());
  EXPECT_FALSE(r.request.options().get_preferred_allocation_available());
  EXPECT_TRUE(r.plugin_listening) << "registered before its socket listened";
}

TEST_F(DevicePluginTest, RegistersWithTheKubeletOnceItsSocketListens) {
  const std::vector<Registration> got = kubelet_.log().wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  expect_registration(got[0]);

  v1beta1::DevicePluginOptions options;
  options.set_pre_start_required(true);
  options.set_get_preferred_allocation_available(true);
  const grpc::Status status =
      stub_->GetDevicePluginOptions(bounded_context().get(), v1beta1::Empty(), &options);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(options.pre_start_required());
  EXPECT_FALSE(options.get_preferred_allocation_available());
}

TEST_F(DevicePluginTest, ListAndWatchSendsEveryDeviceHealthyAndStaysOpen) {
  DeviceWatch watch(stub_.get());
  EXPECT_TRUE(watch.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); }));
  // A kubelet that calls again (as after its restart) gets the list too.
  DeviceWatch second(stub_.get());
  EXPECT_TRUE(second.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); }));
}

using MountRow = std::tuple<std::string, std::string, bool>;
using DeviceRow = std::tuple<std::string, std::string, std::string>;

TEST_F(DevicePluginTest, AllocateGivesEachContainerTheRouterTheLibrariesAndTheDevice) {
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("wharf-0");
  v1beta1::ContainerAllocateRequest* second = request.add_container_requests();
  second->add_devices_ids("wharf-1");
  second->add_devices_ids("wharf-63");
  v1beta1::AllocateResponse response;
  const grpc::Status status = stub_->Allocate(bounded_context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.container_responses_size(), 2);

  const std::string dir = dir_.path();
  const std::map<std::string, std::string> want_envs = {
      {"WHARF_ROUTER", "/run/wharf/wharfd.sock"},
      {"LD_PRELOAD", "/opt/wharf/lib/libibverbs.so.1:/opt/wharf/lib/librdmacm.so.1"}};
  const std::vector<MountRow> want_mounts = {
      {"/run/wharf", dir, true},
      {"/opt/wharf/lib", dir + "/lib", true},
      {"/sys/class/infiniband", state() + "/sys/class/infiniband", true},
      {"/sys/class/infiniband_verbs", state() + "/sys/class/infiniband_verbs", true}};
  const std::vector<DeviceRow> want_devices = {
      {"/dev/infiniband/uverbs0", state() + "/dev/uverbs0", "rw"},
      {"/dev/infiniband/rdma_cm", state() + "/dev/rdma_cm", "rw"}};
  for (const v1beta1::ContainerAllocateResponse& c : response.container_responses()) {
    const std::map<std::string, std::string> envs(c.envs().begin(), c.envs().end());
    EXPECT_EQ(envs, want_envs);
    std::vector<MountRow> mounts;
    for (const v1beta1::Mount& m : c.mounts())
      mounts.emplace_back(m.container_path(), m.host_path(), m.read_only());
    EXPECT_EQ(mounts, want_mounts);
    std::vector<DeviceRow> devices;
    for (const v1beta1::DeviceSpec& d : c.devices())
      devices.emplace_back(d.container_path(), d.host_path(), d.permissions());
    EXPECT_EQ(devices, want_devices);
    const std::map<std::string, std::string> annotations(c.annotations().begin(),
                                                         c.annotations().end());
    EXPECT_EQ(annotations, (std::map<std::string, std::string>{{"io.wharf.device-view", "true"}}));
    EXPECT_TRUE(c.cdi_devices().empty());
  }

  // What the mounts and device specs name is there on the host.
  for (const MountRow& m : want_mounts)
    EXPECT_TRUE(std::filesystem::is_directory(std::get<1>(m))) << std::get<1>(m);
  const std::tuple<std::string, unsigned, unsigned> nodes[] = {
      {state() + "/dev/uverbs0", container::kUverbsMajor, container::kUverbsMinor},
      {state() + "/dev/rdma_cm", container::kRdmaCmMajor, container::kRdmaCmMinor}};
  for (const auto& [path, major_number, minor_number] : nodes) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << path;
    EXPECT_EQ(major(st.st_rdev), major_number) << path;
    EXPECT_EQ(minor(st.st_rdev), minor_number) << path;
    EXPECT_EQ(st.st_mode & 07777, 0666u) << path;
  }
  ASSERT_NE(node_guid_, 0u);
  EXPECT_EQ(read_file(state() + "/sys/class/infiniband/wharf0/node_guid"),
            container::format_guid(node_guid_) + "\n");
  EXPECT_EQ(read_file(state() + "/sys/class/infiniband_verbs/uverbs0/dev"), "231:192\n");
}

TEST_F(DevicePluginTest, AllocateRefusesADeviceNotOfItsOwn) {
  for (const char* id : {"wharf-64", "gpu-0", ""}) {
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids("wharf-0");
    request.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    const grpc::Status status = stub_->Allocate(bounded_context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "id '" << id << "'";
    EXPECT_NE(status.error_message().find("\"" + std::string(id) + "\""), std::string::npos)
        << status.error_message();
  }
}

TEST_F(DevicePluginTest, AnswersPreferredAllocationAndPreStartContainer) {
  v1beta1::PreferredAllocationRequest request;
  v1beta1::ContainerPreferredAllocationRequest* c = request.add_container_requests();
  for (const char* id : {"wharf-5", "wharf-1", "wharf-2"}) c->add_available_deviceids(id);
  c->add_must_include_deviceids("wharf-2");
  c->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse preferred;
  grpc::Status status = stub_->GetPreferredAllocation(bounded_context().get(), request, &preferred);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(preferred.container_responses_size(), 1);
  EXPECT_EQ(std::vector<std::string>(preferred.container_responses(0).deviceids().begin(),
                                     preferred.container_responses(0).deviceids().end()),
            (std::vector<std::string>{"wharf-2", "wharf-5"}));

  v1beta1::PreStartContainerRequest pre_start;
  pre_start.add_devices_ids("wharf-0");
  v1beta1::PreStartContainerResponse started;
  status = stub_->PreStartContainer(bounded_context().get(), pre_start, &started);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(DevicePluginTest, DevicesTurnUnhealthyWhenTheRouterStopsAndHealthyWhenItIsBack) {
  DeviceWatch watch(stub_.get());
  const auto healthy = watch.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); });
  ASSERT_TRUE(healthy);

  router_.reset();  // SIGKILL
  const auto unhealthy =
      watch.wait_for_list([](const auto& l) { return all_devices(l, "Unhealthy"); }, *healthy + 1);
  ASSERT_TRUE(unhealthy) << "no Unhealthy list within the bound after wharfd died";

  start_router();
  EXPECT_TRUE(
      watch.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); }, *unhealthy + 1))
      << "no Healthy list within the bound after wharfd came back";
}

TEST_F(DevicePluginTest, RegistersAgainAfterTheKubeletRestarts) {
  DeviceWatch watch(stub_.get());
  ASSERT_TRUE(watch.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); }));

  // A kubelet that starts deletes every socket in its directory before it serves.
  kubelet_.stop();
  ASSERT_EQ(::unlink(plugin_socket().c_str()), 0) << std::strerror(errno);
  // The plugin serves again while no kubelet answers, and keeps trying to register.
  ASSERT_TRUE(eventually([&] { return accepts_connections(plugin_socket()); }))
      << "the plugin did not serve again on " << plugin_socket();
  EXPECT_TRUE(watch.wait_for_end()) << "the old server's ListAndWatch stream stayed open";
  ASSERT_TRUE(kubelet_.start());

  const std::vector<Registration> got = kubelet_.log().wait_for(2);
  ASSERT_EQ(got.size(), 2u) << "no second Register within the bound";
  expect_registration(got[1]);
  const auto stub = plugin_stub();
  DeviceWatch again(stub.get());
  EXPECT_TRUE(again.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); }));
}

TEST_F(DevicePluginTest, StopsWithStatusZeroOnSigtermAndRemovesItsSocket) {
  DeviceWatch watch(stub_.get());
  ASSERT_TRUE(watch.wait_for_list([](const auto& l) { return all_devices(l, "Healthy"); }));
  ASSERT_TRUE(is_socket(plugin_socket()));

  plugin_->signal(SIGTERM);
  const std::optional<int> status = plugin_->wait_exit();
  ASSERT_TRUE(status) << "still running after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
  EXPECT_FALSE(std::filesystem::exists(plugin_socket()));
  EXPECT_TRUE(watch.wait_for_end());
}

TEST_F(DevicePluginTest, CountSetsHowManyDevicesTheKubeletIsOfferedAndMayAllocate) {
  plugin_->signal(SIGTERM);
  ASSERT_TRUE(plugin_->wait_exit());
  start_plugin({"--count", "3"});
  ASSERT_EQ(kubelet_.log().wait_for(2).size(), 2u) << "the second run did not register";
  const std::unique_ptr<v1beta1::DevicePlugin::Stub> stub = plugin_stub();
  DeviceWatch watch(stub.get());
  EXPECT_TRUE(watch.wait_for_list([](const auto& l) { return all_devices(l, "Healthy", 3); }));
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("wharf-3");
  v1beta1::AllocateResponse response;
  EXPECT_EQ(stub->Allocate(bounded_context().get(), request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DevicePluginTest, ASecondRunRewritesTheDeviceFilesInPlace) {
  const std::string node_guid = state() + "/sys/class/infiniband/wharf0/node_guid";
  const std::string uverbs = state() + "/dev/uverbs0";
  struct stat before {};
  ASSERT_EQ(::stat(node_guid.c_str(), &before), 0) << std::strerror(errno);
  plugin_->signal(SIGTERM);
  ASSERT_TRUE(plugin_->wait_exit());
  // What a running pod sees through its bind mount must survive the restart of the plugin.
  std::ofstream(node_guid, std::ios::trunc) << "stale\n";
  ASSERT_EQ(::unlink(uverbs.c_str()), 0);
  ASSERT_EQ(::mknod(uverbs.c_str(), S_IFCHR | 0600, makedev(1, 3)), 0) << std::strerror(errno);

  start_plugin();
  ASSERT_EQ(kubelet_.log().wait_for(2).size(), 2u) << "the second run did not register";
  struct stat after {};
  ASSERT_EQ(::stat(node_guid.c_str(), &after), 0) << std::strerror(errno);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(read_file(node_guid), container::format_guid(node_guid_) + "\n");
  struct stat node {};
  ASSERT_EQ(::stat(uverbs.c_str(), &node), 0) << std::strerror(errno);
  EXPECT_EQ(node.st_rdev, makedev(container::kUverbsMajor, container::kUverbsMinor));
  EXPECT_EQ(node.st_mode & 07777, 0666u);
}

// Runs the plugin against a router that is not there, with `lib_dir`: it must fail setup
// within the bound, exit 1 and log a line that has `why`.
void expect_setup_failure(const std::string& lib_dir, const test_support::TempDir& dir,
                          const std::string& why) {
  const std::string log = dir.path() + "/plugin.log";
  Child plugin({WHARF_DEVICE_PLUGIN_PATH, "--kubelet-dir", dir.path(), "--state-dir",
                dir.path() + "/state", "--router", dir.path() + "/none.sock", "--lib-dir", lib_dir},
               log);
  ASSERT_TRUE(plugin.started());
  const std::optional<int> status = plugin.wait_exit();
  ASSERT_TRUE(status) << "still running";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << "wait status " << *status;
  EXPECT_NE(read_file(log).find(why), std::string::npos) << read_file(log);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/state")) << "setup went on";
}

TEST(DevicePluginSetupTest, ExitsWithStatusOneWithoutTheLibraries) {
  test_support::TempDir dir("wharf-dp");
  ASSERT_FALSE(dir.path().empty());
  expect_setup_failure(dir.path(), dir, dir.path() + "/libibverbs.so.1: No such file");
}

TEST(DevicePluginSetupTest, ExitsWithStatusOneWithoutARouter) {
  test_support::TempDir dir("wharf-dp");
  ASSERT_FALSE(dir.path().empty());
  std::ofstream(dir.path() + "/libibverbs.so.1") << "";
  expect_setup_failure(dir.path(), dir, "cannot connect to the router at " + dir.path());
}

}  // namespace
}  // namespace wharf
