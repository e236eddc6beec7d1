// wharf-exec's container record (src/container/record.h): any text is parsed without crashing,
// and what parses has the fields the parser promises.
#include <cstddef>
#include <cstdint>
#include <string>

#include "container/record.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wharf::container::Record r;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (wharf::container::parse_record(text, &r) == 0) {
    WHARF_FUZZ_CHECK(r.pid > 0, "a parsed record has a pid");
    WHARF_FUZZ_CHECK(!r.router.empty() && !r.lib_dir.empty(), "and a router and lib_dir");
  }
  return 0;
}
