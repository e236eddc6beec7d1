#include "oci_state.h"

#include <nlohmann/json.hpp>

namespace wharf::oci_hook {
namespace {

using nlohmann::json;

std::optional<json> parse_object(std::string_view text, const char* what, std::string* why) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    *why = std::string(what) + " is not a JSON object";
    return std::nullopt;
  }
  return doc;
}

// A non-empty string member, or nullptr.
const std::string* string_member(const json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    return nullptr;
  return &it->get_ref<const std::string&>();
}

bool has_dot_dot(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::optional<ContainerState> parse_state(std::string_view text, std::string* why) {
  const std::optional<json> doc = parse_object(text, "the state", why);
  if (!doc) return std::nullopt;
  ContainerState s;
  const std::string* id = string_member(*doc, "id");
  const std::string* bundle = string_member(*doc, "bundle");
  if (id == nullptr || bundle == nullptr) {
    *why = "the state has no \"id\" or \"bundle\" string";
    return std::nullopt;
  }
  if ((*bundle)[0] != '/' || bundle->find('\0') != std::string::npos) {
    *why = "the state's bundle is not an absolute path";
    return std::nullopt;
  }
  s.id = *id;
  s.bundle = *bundle;
  if (auto it = doc->find("annotations"); it != doc->end() && !it->is_null()) {
    if (!it->is_object()) {
      *why = "the state's annotations are not an object";
      return std::nullopt;
    }
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) {
        *why = "annotation \"" + key + "\" is not a string";
        return std::nullopt;
      }
      s.annotations[key] = value.get<std::string>();
    }
  }
  return s;
}

bool wants_view(const ContainerState& state) {
  auto it = state.annotations.find(std::string(kViewAnnotation));
  return it != state.annotations.end() && it->second == "true";
}

std::optional<std::string> root_path(std::string_view config_json, const std::string& bundle,
                                     std::string* why) {
  const std::optional<json> doc = parse_object(config_json, "config.json", why);
  if (!doc) return std::nullopt;
  auto root = doc->find("root");
  const std::string* path =
      root != doc->end() && root->is_object() ? string_member(*root, "path") : nullptr;
  if (path == nullptr) {
    *why = "config.json has no \"root\".\"path\" string";
    return std::nullopt;
  }
  if (path->find('\0') != std::string::npos || has_dot_dot(*path)) {
    *why = "config.json's root path \"" + *path + "\" has a \"..\" or a NUL";
    return std::nullopt;
  }
  return (*path)[0] == '/' ? *path : bundle + "/" + *path;
}

}  // namespace wharf::oci_hook
