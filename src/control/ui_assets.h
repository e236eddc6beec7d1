// The dashboard's static files (ui/ in the source tree), built into the orchestrator by
// cmake/EmbedFiles.cmake and served at /ui/ (control/api.cc): no CDN, no install path.
#pragma once

#include <string_view>
#include <vector>

namespace wharf::control {

struct UiAsset {
  const char* name;          // its path under /ui/, e.g. "index.html"
  const char* content_type;  // e.g. "text/html; charset=utf-8"
  std::string_view body;
};

const std::vector<UiAsset>& ui_assets();

}  // namespace wharf::control
