#include "scala/results.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scala/json_fields.h"

namespace wharf::scala {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;
// Bounds on what a file may hold, so that a hostile one cannot make the readers build
// enormous tables or the analyses (walls: backfitting per dimension) run for minutes. A sweep
// of 16k points would take hours; the default space has 10 dimensions.
constexpr size_t kMaxDimensions = 16;
constexpr size_t kMaxLevels = 4096;
constexpr size_t kMaxSamples = 1u << 14;

json space_json(const Space& s) {
  json dims = json::array();
  for (const Dimension& d : s.dims())
    dims.push_back({{"name", d.name},
                    {"levels", d.levels},
                    {"numeric", d.numeric},
                    {"scale", d.scale},
                    {"baseline", d.levels[d.baseline]}});
  return dims;
}

json sample_json(const Space& s, const Sample& x) {
  json config = json::object();
  for (size_t d = 0; d < s.size(); ++d)
    config[s.dims()[d].name] = s.dims()[d].levels[static_cast<size_t>(x.at[d])];
  json j = {{"phase", x.phase}, {"config", config}, {"ok", x.ok}};
  if (x.ok) {
    j["bw_gbps"] = x.bw_gbps;
    j["mrate_mps"] = x.mrate_mps;
    j["lat_p50_us"] = x.lat_p50_us;
    j["lat_p99_us"] = x.lat_p99_us;
  } else {
    j["error"] = x.error;
  }
  return j;
}

// Reading: the helpers (scala/json_fields.h) throw with the reason; from_json turns it into
// the error line.
using json_fields::bad;
using json_fields::count;
using json_fields::field;
using json_fields::flag;
using json_fields::number;
using json_fields::text;

// Names and levels become file names and gnuplot text (wharf-scala plot): only letters,
// digits, '_' and '.' (levels: numbers with k/m/g, and choices like "per_qp").
bool plain_word(const std::string& s) {
  return !s.empty() && s.size() <= 64 && s != "." && s != ".." &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
         });
}

Space read_space(const json& dims) {
  if (!dims.is_array() || dims.empty() || dims.size() > kMaxDimensions)
    bad("\"space\" is not a list of 1 to 16 dimensions");
  std::vector<Dimension> out;
  for (const json& d : dims) {
    Dimension dim;
    dim.name = text(d, "name");
    if (!plain_word(dim.name)) bad("a dimension's name is not a plain word");
    const json& levels = field(d, "levels");
    if (!levels.is_array() || levels.empty() || levels.size() > kMaxLevels)
      bad("dimension " + dim.name + ": \"levels\" is not a list of 1 to 4096 levels");
    for (const json& l : levels) {
      if (!l.is_string() || !plain_word(l.get<std::string>()))
        bad("dimension " + dim.name + ": a level is not a plain word");
      dim.levels.push_back(l.get<std::string>());
    }
    dim.numeric = flag(d, "numeric");
    dim.scale = flag(d, "scale");
    const std::string base = text(d, "baseline");
    auto it = std::find(dim.levels.begin(), dim.levels.end(), base);
    if (it == dim.levels.end()) bad("dimension " + dim.name + ": the baseline is not a level");
    dim.baseline = static_cast<size_t>(it - dim.levels.begin());
    for (const std::string& l : dim.levels) {
      double v = 0;
      if (dim.numeric && !parse_number(l, &v))
        bad("dimension " + dim.name + ": level \"" + l + "\" is not a number");
    }
    out.push_back(std::move(dim));
  }
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = i + 1; j < out.size(); ++j)
      if (out[i].name == out[j].name) bad("dimension " + out[i].name + " appears twice");
  return Space(std::move(out));
}

Sample read_sample(const Space& space, const json& p) {
  Sample x;
  x.phase = text(p, "phase");
  const json& config = field(p, "config");
  if (!config.is_object()) bad("a point's \"config\" is not an object");
  x.at.assign(space.size(), kUnset);
  for (size_t d = 0; d < space.size(); ++d) {
    const Dimension& dim = space.dims()[d];
    const std::string level = text(config, dim.name.c_str());
    auto it = std::find(dim.levels.begin(), dim.levels.end(), level);
    if (it == dim.levels.end()) bad("a point's " + dim.name + " \"" + level + "\" is not a level");
    x.at[d] = static_cast<int>(it - dim.levels.begin());
  }
  x.ok = flag(p, "ok");
  if (!x.ok) {
    x.error = text(p, "error");
    return x;
  }
  x.bw_gbps = number(p, "bw_gbps");
  x.mrate_mps = number(p, "mrate_mps");
  x.lat_p50_us = number(p, "lat_p50_us");
  x.lat_p99_us = number(p, "lat_p99_us");
  return x;
}

}  // namespace

std::string to_json(const SweepFile& f) {
  json points = json::array();
  for (const Sample& s : f.samples) points.push_back(sample_json(f.space, s));
  const double fewer =
      f.samples.empty() ? 0 : static_cast<double>(f.full_factorial) / f.samples.size();
  json j = {{"wharf_scala", kVersion},
            {"devices", {{"local", f.local}, {"remote", f.remote}}},
            {"space", space_json(f.space)},
            {"plan",
             {{"points_run", f.samples.size()},
              {"points_planned", f.planned},
              {"full_factorial", f.full_factorial},
              {"runnable", f.runnable},
              {"fewer_than_full_factorial", fewer},
              {"covering", {{"t", f.t}, {"rows", f.covering_rows}}},
              {"budget_s", f.budget_s},
              {"elapsed_s", f.elapsed_s},
              {"measure_s", f.measure_s},
              {"depth", f.depth},
              {"threads", f.threads}}},
            {"points", points}};
  // Replacing what is not UTF-8 rather than throwing (error texts come from devices and peers).
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

bool from_json(const std::string& input, SweepFile* out, std::string* error) {
  try {
    const json j = json::parse(input);
    if (!j.is_object() || !j.contains("wharf_scala") || j.at("wharf_scala") != kVersion)
      bad("not a wharf-scala sweep file (version 1)");
    SweepFile f;
    const json& dev = field(j, "devices");
    f.local = text(dev, "local");
    f.remote = text(dev, "remote");
    f.space = read_space(field(j, "space"));
    const json& plan = field(j, "plan");
    constexpr double kMaxCount = 0x1p64;
    f.full_factorial = count(plan, "full_factorial", kMaxCount);
    f.runnable = count(plan, "runnable", kMaxCount);
    f.planned = count(plan, "points_planned", kMaxCount);
    f.t = static_cast<int>(count(field(plan, "covering"), "t", 16));
    f.covering_rows = count(field(plan, "covering"), "rows", kMaxCount);
    f.budget_s = number(plan, "budget_s");
    f.elapsed_s = number(plan, "elapsed_s");
    f.measure_s = number(plan, "measure_s");
    f.depth = static_cast<uint32_t>(count(plan, "depth", UINT32_MAX));
    f.threads = static_cast<uint32_t>(count(plan, "threads", UINT32_MAX));
    const json& points = field(j, "points");
    if (!points.is_array() || points.size() > kMaxSamples) bad("\"points\" is not a list");
    for (const json& p : points) f.samples.push_back(read_sample(f.space, p));
    *out = std::move(f);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

bool read_sweep_file(const std::string& path, SweepFile* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot read it";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (!from_json(ss.str(), out, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace wharf::scala
