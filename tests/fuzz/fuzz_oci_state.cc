// Fuzz target for tools/wharf-oci-hook/oci_state.h: the container state a runtime writes on
// the hook's stdin and the bundle's config.json (a container's creator writes its annotations
// and, through its image and runtime, much of both).
//
// Checked for every input, read as either document: an accepted state has an id and an
// absolute bundle; a refusal says why; an accepted root is absolute and has no ".." component.
#include <cstddef>
#include <cstdint>
#include <string>

#include "../tools/wharf-oci-hook/oci_state.h"
#include "fuzz_check.h"

using namespace wharf::oci_hook;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string why;
  if (const auto s = parse_state(text, &why)) {
    WHARF_FUZZ_CHECK(!s->id.empty() && !s->bundle.empty() && s->bundle[0] == '/',
                     "a state without id or absolute bundle accepted");
    (void)wants_view(*s);
  } else {
    WHARF_FUZZ_CHECK(!why.empty(), "state refused silently");
  }
  why.clear();
  if (const auto root = root_path(text, "/bundle", &why)) {
    WHARF_FUZZ_CHECK(!root->empty() && (*root)[0] == '/', "a relative root");
    WHARF_FUZZ_CHECK(root->find("/../") == std::string::npos &&
                         (root->size() < 3 || root->compare(root->size() - 3, 3, "/..") != 0),
                     "a root that climbs out accepted");
  } else {
    WHARF_FUZZ_CHECK(!why.empty(), "config refused silently");
  }
  return 0;
}
