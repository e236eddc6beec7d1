#include "plot.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "report.h"

extern char** environ;

namespace wharf::scala {
namespace {

namespace fs = std::filesystem;

// Text from the sweep file (device names, levels, configurations) goes into gnuplot's quoted
// strings: a file is untrusted input, and a quote or a newline there would end the string and
// make the rest a command (gnuplot's `system`). Anything but plain characters becomes '?'.
std::string plain(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (!isalnum(static_cast<unsigned char>(c)) &&
        std::string_view(" _.,:/()=+-").find(c) == std::string_view::npos)
      c = '?';
  return out;
}

// Levels sit at their index on the axes (they are spaced by powers of two, not evenly); the
// tics name them.
std::string tics(const Dimension& d, const std::set<int>& used) {
  std::string s = "(";
  for (int i : used)
    s += (s.size() > 1 ? ", " : "") + std::string("\"") + plain(d.levels[static_cast<size_t>(i)]) +
         "\" " + std::to_string(i);
  return s + ")";
}

// Where a wall goes on an index axis: just before the level it is at (from there on, the
// device is past it).
double wall_position(const Dimension& d, const Wall& w) {
  for (size_t i = 0; i < d.levels.size(); ++i) {
    double v = 0;
    if (parse_number(d.levels[i], &v) && v == w.at) return static_cast<double>(i) - 0.5;
  }
  return -1;
}

int run_gnuplot(const fs::path& script) {
  const std::string path = script.string();
  char* argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>(path.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ) != 0) {
    fprintf(stderr, "wharf-scala: cannot run gnuplot (apt-get install gnuplot-nox)\n");
    return 1;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "wharf-scala: gnuplot failed on %s\n", path.c_str());
    return 1;
  }
  return 0;
}

// Both formats of one picture: `body` draws it.
void both_formats(std::ostream& gp, const fs::path& dir, const std::string& name,
                  const std::string& body) {
  gp << "set terminal pngcairo size 900,700 font 'sans,10'\nset output '"
     << (dir / (name + ".png")).string() << "'\n"
     << body << "set terminal svg size 900,700 font 'sans,10'\nset output '"
     << (dir / (name + ".svg")).string() << "'\n"
     << body;
}

void plane_plots(const SweepFile& f, const std::vector<Wall>& walls, const fs::path& dir,
                 std::ostream& gp, std::vector<std::string>* drawn) {
  const std::vector<ConfigGroup> groups = plane_groups(f);
  if (groups.empty()) return;
  const ConfigGroup& g = groups.front();
  const size_t ql = static_cast<size_t>(f.space.index_of("ql"));
  const size_t qr = static_cast<size_t>(f.space.index_of("qr"));
  std::set<int> qls, qrs;
  std::ofstream data(dir / "plane.dat");
  data << "# ql_index qr_index bw_gbps lat_p50_us ql qr (" << g.config << ")\n";
  for (const Sample* x : g.samples) {
    qls.insert(x->at[ql]);
    qrs.insert(x->at[qr]);
    data << x->at[ql] << ' ' << x->at[qr] << ' ' << x->bw_gbps << ' ' << x->lat_p50_us << ' '
         << f.space.dims()[ql].levels[static_cast<size_t>(x->at[ql])] << ' '
         << f.space.dims()[qr].levels[static_cast<size_t>(x->at[qr])] << '\n';
  }
  std::ostringstream marks;
  for (const Wall& w : walls) {
    if (w.dimension == "ql")
      marks << "set arrow from " << wall_position(f.space.dims()[ql], w) << ", graph 0 to "
            << wall_position(f.space.dims()[ql], w)
            << ", graph 1 nohead dt 2 lw 3 lc rgb 'red' front\n";
    if (w.dimension == "qr")
      marks << "set arrow from graph 0, first " << wall_position(f.space.dims()[qr], w)
            << " to graph 1, first " << wall_position(f.space.dims()[qr], w)
            << " nohead dt 2 lw 3 lc rgb 'red' front\n";
  }
  const std::string common = "unset arrow\n" + marks.str() + "set xlabel 'ql (local QPs)'\n" +
                             "set ylabel 'qr (remote QPs)'\nset xtics " +
                             tics(f.space.dims()[ql], qls) + "\nset ytics " +
                             tics(f.space.dims()[qr], qrs) + "\nset palette rgbformulae 33,13,10\n";
  const std::string plane = (dir / "plane.dat").string();
  both_formats(gp, dir, "bw_plane",
               common + "set title 'Bandwidth both ways, Gb/s (" + plain(g.config) + "; " +
                   plain(f.local) + ")'\nplot '" + plane +
                   "' using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 lc palette notitle\n");
  both_formats(gp, dir, "lat_plane",
               common + "set title 'Latency p50, us (" + plain(g.config) + ")'\nplot '" + plane +
                   "' using 1:2:(0.5):(0.5):4 with boxxyerror fs solid 1.0 lc palette notitle\n");
  drawn->insert(drawn->end(), {"bw_plane", "lat_plane"});
}

void scan_plots(const SweepFile& f, const WallThresholds& limits, const fs::path& dir,
                std::ostream& gp, std::vector<std::string>* drawn) {
  const Assignment base = f.space.baseline();
  for (size_t d = 0; d < f.space.size(); ++d) {
    const Dimension& dim = f.space.dims()[d];
    const std::string phase = "scan:" + dim.name;
    // The scan's points, and the baseline it starts from (measured once, by the first scan).
    std::map<int, const Sample*> by_level;
    for (const Sample& x : f.samples)
      if (x.ok && (x.phase == phase || x.at == base)) by_level.emplace(x.at[d], &x);
    if (by_level.size() < 2) continue;
    const fs::path file = dir / ("scan_" + dim.name + ".dat");
    std::ofstream data(file);
    data << "# level_index bw_gbps lat_p50_us lat_p99_us " << dim.name << "\n";
    std::set<int> used;
    for (auto [level, x] : by_level) {
      used.insert(level);
      data << level << ' ' << x->bw_gbps << ' ' << x->lat_p50_us << ' ' << x->lat_p99_us << ' '
           << dim.levels[static_cast<size_t>(level)] << '\n';
    }
    // The wall this scan shows (the merged ones may come from other scans of the dimension).
    std::vector<Sample> scan_samples;
    for (auto [level, x] : by_level) scan_samples.push_back(*x);
    std::ostringstream marks;
    for (const Wall& w : find_walls(f.space, scan_samples, limits))
      if (w.dimension == dim.name)
        marks << "set arrow from " << wall_position(dim, w) << ", graph 0 to "
              << wall_position(dim, w) << ", graph 1 nohead dt 2 lw 3 lc rgb 'red'\n"
              << "set label 'wall at " << w.at << "' at " << wall_position(dim, w)
              << ", graph 0.95 offset 1,0 tc rgb 'red'\n";
    const std::string s = file.string();
    both_formats(gp, dir, "scan_" + dim.name,
                 "unset arrow\nunset label\nset ytics autofreq\n" + marks.str() +
                     "set title 'Scan of " + dim.name + " from the baseline (" + plain(f.local) +
                     ")'\nset xlabel '" + dim.name + "'\nset xtics " + tics(dim, used) +
                     "\nset ytics nomirror\nset y2tics\nset ylabel 'Gb/s'\nset y2label 'us'\n"
                     "set key top left\nplot '" +
                     s + "' using 1:2 with linespoints lw 2 title 'bandwidth', '" + s +
                     "' using 1:3 axes x1y2 with linespoints lw 2 title 'latency p50', '" + s +
                     "' using 1:4 axes x1y2 with lines dt 3 title 'latency p99'\n"
                     "unset y2tics\nunset y2label\nset ytics mirror\n");
    drawn->push_back("scan_" + dim.name);
  }
}

}  // namespace

int draw_plots(const SweepFile& f, const WallThresholds& limits, const std::string& out) {
  const fs::path dir(out);
  if (plain(out) != out) {
    fprintf(stderr,
            "wharf-scala: %s: the directory's name must be plain (letters, digits, "
            "' _.,:/()=+-')\n",
            out.c_str());
    return 1;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    fprintf(stderr, "wharf-scala: %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  const std::vector<Wall> walls = find_walls(f.space, f.samples, limits);
  std::ofstream gp(dir / "plots.gp");
  std::vector<std::string> drawn;
  plane_plots(f, walls, dir, gp, &drawn);
  scan_plots(f, limits, dir, gp, &drawn);
  gp.close();
  if (drawn.empty()) {
    fprintf(stderr, "wharf-scala: nothing to draw: no plane and no scans in the file\n");
    return 1;
  }
  if (run_gnuplot(dir / "plots.gp") != 0) return 1;
  for (const std::string& d : drawn) printf("%s\n", (dir / (d + ".png")).c_str());
  return 0;
}

}  // namespace wharf::scala
