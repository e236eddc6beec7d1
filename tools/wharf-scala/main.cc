// wharf-scala: ScalaCN's greybox performance tester on any verbs device (issue #21).
//
//   wharf-scala sweep --local SOCK|DEV --remote SOCK|DEV|HOST:PORT [--dim NAME=RANGE]...
//                     [--budget S] [-t T] [--depth N] [--threads N] [--vip A[,B]] -o FILE.json
//   wharf-scala serve --device SOCK|DEV --listen ADDR:PORT [--vip A] [--once]
//   wharf-scala fit FILE.json [-j] [--predict QL,QR]...
//   wharf-scala walls FILE.json [-j] [--bw-drop F] [--lat-factor F]
//   wharf-scala plot FILE.json -o DIR
//
// docs/OPERATIONS.md walks through them on a lab cluster.
#include <arpa/inet.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent.h"
#include "device.h"
#include "engine.h"
#include "plot.h"
#include "report.h"
#include "scala/constraints.h"
#include "scala/plan.h"
#include "scala/results.h"
#include "scala/walls.h"

namespace {

namespace fs = std::filesystem;
using namespace wharf::scala;
using Clock = std::chrono::steady_clock;

// A router's device is Wharf's: the process needs Wharf's libibverbs (lib/ beside bin/). Unless
// it already runs with it, wharf-scala runs itself again with it preloaded, as wharf-run does
// for containers. Real RNICs need nothing.
constexpr const char* kPreloadedEnv = "WHARF_SCALA_PRELOADED";

int run_with_wharf_verbs(char** argv) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path lib = exe.parent_path().parent_path() / "lib";
  const fs::path verbs = lib / "libibverbs.so.1";
  if (ec || !fs::exists(verbs)) {
    fprintf(stderr, "wharf-scala: no %s: cannot reach a Wharf router\n", verbs.c_str());
    return 1;
  }
  std::string preload = verbs.string() + ":" + (lib / "librdmacm.so.1").string();
  if (const char* old = getenv("LD_PRELOAD"); old != nullptr && *old != '\0')
    preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv(kPreloadedEnv, "1", 1);
  execv(exe.c_str(), argv);
  perror("wharf-scala: exec");
  return 1;
}

// Every QP maps its rings from a descriptor: thousands of QPs need more than the soft limit.
void raise_file_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

// What the engine takes of each numeric dimension (a level outside is refused at --dim):
// counts at least 1, messages within a work request's 2 GiB, a registration that holds one.
struct Bounds {
  const char* dim;
  double min, max;
};
constexpr Bounds kBounds[] = {{"ql", 1, 1 << 20},      {"qr", 1, 1 << 20},
                              {"size", 1, 0x1p31 - 1}, {"mrs", 1, 1 << 16},
                              {"mr_size", 8, 0x1p40},  {"networks", 1, kMaxTenantNetworks + 1},
                              {"rules", 0, 4096}};

bool within_bounds(const Space& space, std::string* error) {
  for (const Bounds& b : kBounds) {
    const int d = space.index_of(b.dim);
    if (d < 0) continue;
    for (const std::string& level : space.dims()[static_cast<size_t>(d)].levels) {
      double v = 0;
      if (parse_number(level, &v) && v >= b.min && v <= b.max) continue;
      *error = std::string(b.dim) + "=" + level + ": want " + std::to_string(uint64_t(b.min)) +
               ".." + std::to_string(uint64_t(b.max));
      return false;
    }
  }
  return true;
}

PointSpec spec_of(const Space& s, const Assignment& a) {
  PointSpec p;
  auto num = [&](const char* name, double dflt) {
    const double v = s.number(a, name);
    return v == v ? v : dflt;  // NaN: the space lacks it
  };
  auto is = [&](const char* name, const char* level) { return s.level(a, name) == level; };
  p.ql = static_cast<uint32_t>(num("ql", 1));
  p.qr = static_cast<uint32_t>(num("qr", 1));
  p.size = static_cast<uint32_t>(num("size", 4096));
  p.opcode = is("opcode", "send")     ? Opcode::kSend
             : is("opcode", "read")   ? Opcode::kRead
             : is("opcode", "atomic") ? Opcode::kAtomic
                                      : Opcode::kWrite;
  p.qp_type = is("qp_type", "uc") ? IBV_QPT_UC : is("qp_type", "ud") ? IBV_QPT_UD : IBV_QPT_RC;
  p.shared_cq = !is("cq", "per_qp");
  p.srq = is("srq", "on");
  p.inline_data = is("inline", "on");
  p.mrs = static_cast<uint32_t>(num("mrs", 1));
  p.mr_size = static_cast<uint64_t>(num("mr_size", 65536));
  p.networks = static_cast<uint32_t>(num("networks", 1));
  p.rules = static_cast<uint32_t>(num("rules", 0));
  return p;
}

std::string describe_point(const Space& s, const Assignment& a) {
  std::string out;
  for (size_t d = 0; d < s.size(); ++d)
    out += (out.empty() ? "" : " ") + s.dims()[d].name + "=" +
           s.dims()[d].levels[static_cast<size_t>(a[d])];
  return out;
}

struct SweepOptions {
  std::string local, remote, output;
  std::vector<std::string> vips;  // the engine's own container's, local then remote
  std::vector<std::string> dims;
  double budget_s = 120;
  int t = 2;
  uint32_t depth = 2;
  uint32_t threads = 1;
  double measure_s = 0;  // 0: from the budget
  bool quiet = false;
};

// Makes this process a container of its own on each router, at vips[i] on routers[i]
// (OwnContainer); false after printing why.
bool join_as_container(OwnContainer* own, const std::vector<std::string>& routers,
                       const std::vector<std::string>& vips) {
  std::vector<uint32_t> addresses;
  for (const std::string& text : vips) {
    in_addr a{};
    if (inet_pton(AF_INET, text.c_str(), &a) != 1 || a.s_addr == 0) {
      fprintf(stderr, "wharf-scala: --vip %s: not an IPv4 address\n", text.c_str());
      return false;
    }
    addresses.push_back(ntohl(a.s_addr));
  }
  if (std::string error = own->join(routers, addresses); !error.empty()) {
    fprintf(stderr, "wharf-scala: %s\n", error.c_str());
    return false;
  }
  return true;
}

int sweep(const SweepOptions& o, char** argv) {
  Space space = default_space();
  for (const std::string& d : o.dims) {
    std::string error;
    if (!space.set_levels(d, &error)) {
      fprintf(stderr, "wharf-scala: --dim %s: %s\n", d.c_str(), error.c_str());
      return 2;
    }
  }
  if (std::string error; !within_bounds(space, &error)) {
    fprintf(stderr, "wharf-scala: --dim %s\n", error.c_str());
    return 2;
  }
  if ((is_router_socket(o.local) || is_router_socket(o.remote)) && getenv(kPreloadedEnv) == nullptr)
    return run_with_wharf_verbs(argv);
  raise_file_limit();
  std::string error;
  // The agent is reached from the host's network: connected before --vip moves the process
  // into a namespace of its own.
  std::unique_ptr<AgentClient> agent;
  if (is_agent_address(o.remote)) {
    agent = AgentClient::connect(o.remote, &error);
    if (agent == nullptr) {
      fprintf(stderr, "wharf-scala: %s\n", error.c_str());
      return 1;
    }
  }
  // The routers this process reaches: both ends, or the local one beside an agent.
  std::vector<std::string> routers = {o.local};
  if (agent == nullptr) routers.push_back(o.remote);
  OwnContainer own;
  if (!o.vips.empty()) {
    const bool all_routers = std::all_of(routers.begin(), routers.end(), is_router_socket);
    if (o.vips.size() != routers.size() || !all_routers) {
      fprintf(stderr, "wharf-scala: --vip takes an address for each Wharf router (%zu)\n",
              routers.size());
      return 2;
    }
    if (!join_as_container(&own, routers, o.vips)) return 1;
  }
  std::unique_ptr<Engine> engine = Engine::open(o.local, o.remote, std::move(agent), &error);
  if (engine == nullptr) {
    fprintf(stderr, "wharf-scala: %s\n", error.c_str());
    return 1;
  }
  // What these ends cannot vary stays at the one level they run (the default space's
  // baseline), said once rather than failed at every point; asked for with any other level, it
  // is an error.
  const Space defaults = default_space();
  for (const Engine::Fixed& f : engine->fixed_dimensions()) {
    const int d = space.index_of(f.dimension);
    const int def = defaults.index_of(f.dimension);
    if (d < 0 || def < 0) continue;
    const Dimension& dim = space.dims()[static_cast<size_t>(d)];
    const Dimension& runs = defaults.dims()[static_cast<size_t>(def)];
    const std::string& level = runs.levels[runs.baseline];
    if (dim.levels.size() == 1 && dim.levels[0] == level) continue;
    const bool asked = std::any_of(o.dims.begin(), o.dims.end(), [&](const std::string& spec) {
      return spec.rfind(f.dimension + "=", 0) == 0;
    });
    if (asked) {
      fprintf(stderr, "wharf-scala: --dim %s: only %s here: %s\n", f.dimension.c_str(),
              level.c_str(), f.why.c_str());
      return 2;
    }
    const std::string pin = f.dimension + "=" + level;
    printf("wharf-scala: %s kept at its baseline: %s\n", pin.c_str(), f.why.c_str());
    if (!space.set_levels(pin, &error)) {
      fprintf(stderr, "wharf-scala: %s\n", error.c_str());
      return 1;
    }
  }
  if (o.depth > engine->max_qp_wr()) {
    fprintf(stderr, "wharf-scala: --depth %u: the devices take at most %u\n", o.depth,
            engine->max_qp_wr());
    return 2;
  }
  const Plan plan = make_plan(space, o.t);
  RunOptions run;
  run.depth = o.depth;
  run.threads = o.threads;
  // Each point costs its warm-up, its measurement and its set-up (about 0.1 s): the
  // measurement gets what the budget leaves, within [0.1, 0.3] s.
  run.measure_s = o.measure_s > 0
                      ? o.measure_s
                      : std::clamp(0.8 * o.budget_s / plan.points.size() - 0.2, 0.1, 0.3);
  printf(
      "wharf-scala: %zu points planned: scans, the ql x qr plane and a %d-wise covering "
      "array (%zu rows), of a full factorial of %llu points (%llu runnable under the "
      "constraints): %.0fx fewer; budget %.0f s, %.2f s measured per point\n",
      plan.points.size(), plan.t, plan.covering_rows,
      static_cast<unsigned long long>(plan.full_factorial),
      static_cast<unsigned long long>(plan.runnable),
      static_cast<double>(plan.full_factorial) / plan.points.size(), o.budget_s, run.measure_s);
  fflush(stdout);

  SweepFile file;
  file.local = engine->local_name();
  file.remote = engine->remote_name();
  file.space = space;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  double slowest = 0;
  // Runs one point and records it; false once the budget has no room for another.
  auto measure = [&](const Assignment& at, const std::string& phase, const char* counter,
                     double budget) {
    if (elapsed() + std::max(slowest, run.warmup_s + run.measure_s) > budget) return false;
    const double t0 = elapsed();
    const PointResult r = engine->run(spec_of(space, at), run);
    slowest = std::max(slowest, elapsed() - t0);
    Sample s;
    s.at = at;
    s.phase = phase;
    s.ok = r.ok;
    s.error = r.error;
    s.bw_gbps = r.bw_gbps;
    s.mrate_mps = r.mrate_mps;
    s.lat_p50_us = r.lat_p50_us;
    s.lat_p99_us = r.lat_p99_us;
    file.samples.push_back(s);
    if (o.quiet) return true;
    if (r.ok)
      fprintf(stderr, "[%s %4.0fs] %-10s %s: %.2f Gb/s %.3f Mmsg/s p50 %.1f us p99 %.1f us\n",
              counter, elapsed(), phase.c_str(), describe_point(space, at).c_str(), r.bw_gbps,
              r.mrate_mps, r.lat_p50_us, r.lat_p99_us);
    else
      fprintf(stderr, "[%s %4.0fs] %-10s %s: failed: %s\n", counter, elapsed(), phase.c_str(),
              describe_point(space, at).c_str(), r.error.c_str());
    return true;
  };
  // The plan may take all but the last tenth of the budget, which measures again the points
  // a wall rests on alone (walls_to_confirm): twice, so that the median of three decides.
  char counter[48];
  for (size_t i = 0; i < plan.points.size(); ++i) {
    snprintf(counter, sizeof(counter), "%3zu/%zu", i + 1, plan.points.size());
    if (!measure(plan.points[i].at, plan.points[i].phase, counter, 0.9 * o.budget_s)) {
      printf("wharf-scala: budget reached: %zu of %zu planned points ran\n", i, plan.points.size());
      break;
    }
  }
  constexpr size_t kMaxConfirmPerRound = 8;
  for (int round = 0; round < 2; ++round) {
    const std::vector<Assignment> again = walls_to_confirm(space, file.samples);
    for (size_t j = 0; j < again.size() && j < kMaxConfirmPerRound; ++j) {
      snprintf(counter, sizeof(counter), "again %d", round + 1);
      if (!measure(again[j], "confirm", counter, o.budget_s)) break;
    }
  }
  file.full_factorial = plan.full_factorial;
  file.runnable = plan.runnable;
  file.t = plan.t;
  file.covering_rows = plan.covering_rows;
  file.planned = plan.points.size();
  file.budget_s = o.budget_s;
  file.elapsed_s = elapsed();
  file.measure_s = run.measure_s;
  file.depth = run.depth;
  file.threads = run.threads;
  std::ofstream out(o.output);
  out << to_json(file);
  if (!out.flush()) {
    fprintf(stderr, "wharf-scala: cannot write %s\n", o.output.c_str());
    return 1;
  }
  size_t failed = 0;
  for (const Sample& s : file.samples) failed += s.ok ? 0 : 1;
  printf(
      "wharf-scala: ran %zu points (%zu failed) in %.0f s against a full factorial of %llu: "
      "%.0fx fewer; results in %s\n",
      file.samples.size(), failed, file.elapsed_s,
      static_cast<unsigned long long>(plan.full_factorial),
      file.samples.empty() ? 0.0 : static_cast<double>(plan.full_factorial) / file.samples.size(),
      o.output.c_str());
  return file.samples.empty() || failed == file.samples.size() ? 1 : 0;
}

bool load(const std::string& path, SweepFile* f) {
  std::string error;
  if (read_sweep_file(path, f, &error)) return true;
  fprintf(stderr, "wharf-scala: %s\n", error.c_str());
  return false;
}

int run(int argc, char** argv) {
  CLI::App app{"wharf-scala: finds the scalability walls of an RDMA network (ScalaCN)"};
  app.require_subcommand(1);

  SweepOptions so;
  CLI::App* sw = app.add_subcommand("sweep", "Measure the space between two devices");
  sw->add_option("--local", so.local, "A Wharf router's socket, or a local device name")
      ->required();
  sw->add_option("--remote", so.remote,
                 "The other end: a router's socket, a device name, or HOST:PORT of a "
                 "`wharf-scala serve`")
      ->required();
  sw->add_option("--vip", so.vips,
                 "LOCAL[,REMOTE]: run as a container at these addresses on the routers "
                 "(Ethernet routers across hosts; root)")
      ->delimiter(',')
      ->expected(1, 2);
  sw->add_option("--dim", so.dims, "NAME=RANGE: a dimension's levels (\"1,4,16\", \"1..256\")");
  sw->add_option("--budget", so.budget_s, "Seconds the sweep may take")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  sw->add_option("-t,--strength", so.t, "The covering array's strength (t-wise)")
      ->check(CLI::Range(1, 3))
      ->capture_default_str();
  sw->add_option("--depth", so.depth, "Work requests in flight per QP")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sw->add_option("--threads", so.threads, "Threads driving the QPs")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sw->add_option("--measure", so.measure_s, "Seconds measured per point (default: from the budget)")
      ->check(CLI::Range(0.01, 60.0));
  sw->add_flag("-q,--quiet", so.quiet, "No line per point");
  sw->add_option("-o,--output", so.output, "The results file (JSON)")->required();

  std::string file;
  bool json_out = false;
  std::vector<std::string> predict;
  CLI::App* fit = app.add_subcommand("fit", "Fit the BW and LAT models per configuration");
  fit->add_option("file", file, "A sweep's results")->required();
  fit->add_flag("-j,--json", json_out, "JSON: a list of objects (u v m n w a b c gd ...)");
  fit->add_option("--predict", predict, "QL,QR: also predict BW and LAT there");

  WallOptions wo;
  CLI::App* walls = app.add_subcommand("walls", "Find the walls and the critical path");
  walls->add_option("file", file, "A sweep's results")->required();
  walls->add_flag("-j,--json", json_out, "JSON: a list of walls");
  walls->add_option("--bw-drop", wo.limits.bw_drop, "A wall: bandwidth falls by this share")
      ->check(CLI::Range(0.01, 0.99))
      ->capture_default_str();
  walls
      ->add_option("--lat-factor", wo.limits.lat_factor,
                   "A wall: latency exceeds its trend this many times")
      ->check(CLI::Range(1.01, 1000.0))
      ->capture_default_str();

  std::string device, listen, serve_vip;
  bool once = false;
  CLI::App* srv = app.add_subcommand("serve", "Run the remote half of sweeps from another host");
  srv->add_option("--device", device, "A Wharf router's socket, or a device name")->required();
  srv->add_option("--listen", listen, "ADDR:PORT to take sweeps at (no authentication)")
      ->required();
  srv->add_option("--vip", serve_vip,
                  "Run as a container at this address on the router (Ethernet; root)");
  srv->add_flag("--once", once, "Exit after the first sweep");

  std::string out_dir;
  CLI::App* plot = app.add_subcommand("plot", "Heatmaps of the plane and the scans (gnuplot)");
  plot->add_option("file", file, "A sweep's results")->required();
  plot->add_option("-o,--output", out_dir, "The directory for the pictures")->required();

  CLI11_PARSE(app, argc, argv);
  if (sw->parsed()) return sweep(so, argv);
  if (srv->parsed()) {
    if (is_router_socket(device) && getenv(kPreloadedEnv) == nullptr)
      return run_with_wharf_verbs(argv);
    // Listening from the host's network, before --vip moves the process into a namespace of
    // its own (the socket keeps the namespace it was made in).
    std::string error;
    wharf::UniqueFd listener = listen_at(listen, &error);
    if (!listener.valid()) {
      fprintf(stderr, "wharf-scala: --listen %s: %s\n", listen.c_str(), error.c_str());
      return 2;
    }
    OwnContainer own;
    if (!serve_vip.empty() && !join_as_container(&own, {device}, {serve_vip})) return 1;
    return serve(device, listen, listener.get(), once);
  }
  SweepFile f;
  if (!load(file, &f)) return 1;
  if (fit->parsed()) return print_fits(f, predict, json_out);
  if (walls->parsed()) return print_walls(f, wo, json_out);
  return draw_plots(f, wo.limits, out_dir);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "wharf-scala: %s\n", e.what());
  } catch (...) {
    fprintf(stderr, "wharf-scala: unknown error\n");
  }
  return 1;
}
