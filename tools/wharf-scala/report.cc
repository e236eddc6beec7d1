#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace wharf::scala {
namespace {

using nlohmann::json;

// Rounds for the JSON, so that files and diffs stay readable.
double round_to(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

bool parse_pair(const std::string& s, double* ql, double* qr) {
  const size_t comma = s.find(',');
  return comma != std::string::npos && parse_number(s.substr(0, comma), ql) &&
         parse_number(s.substr(comma + 1), qr);
}

}  // namespace

std::vector<ConfigGroup> plane_groups(const SweepFile& f) {
  const Space& s = f.space;
  const int ql = s.index_of("ql"), qr = s.index_of("qr");
  std::map<Assignment, ConfigGroup> groups;
  for (const Sample& x : f.samples) {
    if (!x.ok || ql < 0 || qr < 0) continue;
    Assignment key = x.at;
    key[static_cast<size_t>(ql)] = key[static_cast<size_t>(qr)] = kUnset;
    groups[key].samples.push_back(&x);
  }
  std::vector<ConfigGroup> out;
  for (auto& [key, g] : groups) {
    std::set<int> qls, qrs;
    for (const Sample* x : g.samples) {
      qls.insert(x->at[static_cast<size_t>(ql)]);
      qrs.insert(x->at[static_cast<size_t>(qr)]);
    }
    if (g.samples.size() < 5 || qls.size() < 2 || qrs.size() < 2) continue;
    for (size_t d = 0; d < s.size(); ++d) {
      const Dimension& dim = s.dims()[d];
      if (key[d] == kUnset || key[d] == static_cast<int>(dim.baseline)) continue;
      g.config +=
          (g.config.empty() ? "" : " ") + dim.name + "=" + dim.levels[static_cast<size_t>(key[d])];
    }
    if (g.config.empty()) g.config = "baseline";
    out.push_back(std::move(g));
  }
  std::stable_sort(out.begin(), out.end(), [](const ConfigGroup& a, const ConfigGroup& b) {
    return a.samples.size() > b.samples.size();
  });
  return out;
}

Fit fit_group(const Space& space, const ConfigGroup& g) {
  std::vector<PlanePoint> bw, lat;
  for (const Sample* x : g.samples) {
    const double ql = space.number(x->at, "ql"), qr = space.number(x->at, "qr");
    bw.push_back({ql, qr, x->bw_gbps});
    lat.push_back({ql, qr, x->lat_p50_us});
  }
  return {fit_bw(bw), fit_lat(lat)};
}

int print_fits(const SweepFile& f, const std::vector<std::string>& predict, bool json_out) {
  std::vector<std::pair<double, double>> at;
  for (const std::string& p : predict) {
    double ql = 0, qr = 0;
    if (!parse_pair(p, &ql, &qr)) {
      fprintf(stderr, "wharf-scala: --predict %s: want QL,QR (two numbers)\n", p.c_str());
      return 2;
    }
    at.emplace_back(ql, qr);
  }
  const std::vector<ConfigGroup> groups = plane_groups(f);
  if (groups.empty()) {
    fprintf(stderr, "wharf-scala: no configuration has enough of the ql x qr plane to fit\n");
    return 1;
  }
  json rows = json::array();
  if (!json_out)
    printf("%-24s %-22s %6s %9s %8s %8s %8s %8s %7s %7s %7s %6s %6s\n", "device", "config",
           "points", "u", "v", "m", "n", "w", "a", "b", "c", "GD", "GD_bw");
  for (const ConfigGroup& g : groups) {
    const Fit fit = fit_group(f.space, g);
    json predictions = json::array();
    for (auto [ql, qr] : at)
      predictions.push_back({{"ql", ql},
                             {"qr", qr},
                             {"bw_gbps", round_to(fit.bw.at(ql, qr), 4)},
                             {"lat_p50_us", round_to(fit.lat.at(ql, qr), 3)}});
    rows.push_back({{"device", f.local},
                    {"config", g.config},
                    {"points", g.samples.size()},
                    {"u", round_to(fit.bw.u, 4)},
                    {"v", round_to(fit.bw.v, 4)},
                    {"m", round_to(fit.bw.m, 4)},
                    {"n", round_to(fit.bw.n, 4)},
                    {"w", round_to(fit.bw.w, 4)},
                    {"a", round_to(fit.lat.a, 5)},
                    {"b", round_to(fit.lat.b, 5)},
                    {"c", round_to(fit.lat.c, 4)},
                    {"gd", round_to(fit.lat.r2, 4)},
                    {"gd_bw", round_to(fit.bw.r2, 4)},
                    {"bw_fitted", fit.bw.fitted},
                    {"lat_fitted", fit.lat.fitted},
                    {"predictions", predictions}});
    if (json_out) continue;
    printf("%-24.24s %-22.22s %6zu %9.2f %8.2f %8.2f %8.2f %8.2f %7.4f %7.4f %7.3f %6.3f %6.3f\n",
           f.local.c_str(), g.config.c_str(), g.samples.size(), fit.bw.u, fit.bw.v, fit.bw.m,
           fit.bw.n, fit.bw.w, fit.lat.a, fit.lat.b, fit.lat.c, fit.lat.r2, fit.bw.r2);
    for (auto [ql, qr] : at)
      printf("  predicted at ql=%g qr=%g: %.3f Gb/s, p50 %.2f us\n", ql, qr, fit.bw.at(ql, qr),
             fit.lat.at(ql, qr));
  }
  if (json_out)
    printf("%s\n", rows.dump(1).c_str());
  else
    printf(
        "BW = u*exp(-((ql-m)^2+(qr-n)^2)/(2v^2))+w Gb/s; LAT = a*ql+b*qr+c us (p50); GD: "
        "R^2 of the LAT plane, GD_bw: of the BW surface\n");
  return 0;
}

int print_walls(const SweepFile& f, const WallOptions& o, bool json_out) {
  const std::vector<Wall> walls = find_walls(f.space, f.samples, o.limits);
  if (json_out) {
    json out = json::array();
    for (const Wall& w : walls)
      out.push_back({{"dimension", w.dimension},
                     {"at", w.at},
                     {"before", w.before},
                     {"bw_drop", round_to(w.bw_drop, 4)},
                     {"lat_factor", round_to(w.lat_factor, 3)},
                     {"scans", w.scans},
                     {"critical", w.critical}});
    printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  printf(
      "importance for bandwidth (sensitivity: eta^2 of log BW; removal: variance lost "
      "without it):\n");
  std::vector<Importance> imp = importance(f.space, f.samples);
  std::sort(imp.begin(), imp.end(), [](const Importance& a, const Importance& b) {
    return std::max(a.sensitivity, a.removal) > std::max(b.sensitivity, b.removal);
  });
  for (const Importance& i : imp)
    printf("  %-10s sensitivity %.3f  removal %.3f%s\n", i.dimension.c_str(), i.sensitivity,
           i.removal,
           std::max(i.sensitivity, i.removal) >= o.limits.min_importance ? "  (critical)" : "");
  if (walls.empty()) {
    printf(
        "no walls: along no scale did bandwidth fall by %.0f%% or latency grow %.1fx faster "
        "than the scale\n",
        o.limits.bw_drop * 100, o.limits.lat_factor);
    return 0;
  }
  for (const Wall& w : walls) {
    std::string crit;
    for (const std::string& c : w.critical) crit += (crit.empty() ? "" : ", ") + c;
    printf(
        "wall on %s at %.0f (after %.0f): bandwidth -%.0f%%, latency grew %.2fx as fast as %s; "
        "%d scan(s); critical path: %s\n",
        w.dimension.c_str(), w.at, w.before, w.bw_drop * 100, w.lat_factor, w.dimension.c_str(),
        w.scans, crit.c_str());
  }
  return 0;
}

}  // namespace wharf::scala
