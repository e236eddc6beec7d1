// Fuzz target for control/cidr.h: addresses and CIDR blocks typed by users (wharfctl, the
// orchestrator's API) and read back from the store.
//
// Checked for every input: an accepted block has a prefix of 0..32 and zero host bits, formats
// back to exactly the input text (the grammar has one spelling per block) and contains its own
// base; the same for an accepted address; a block overlaps itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include "control/cidr.h"
#include "fuzz_check.h"

using namespace wharf::control;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Cidr c;
  if (parse_cidr(text, &c)) {
    WHARF_FUZZ_CHECK(c.prefix >= 0 && c.prefix <= 32, "prefix range");
    WHARF_FUZZ_CHECK((c.base & ~c.mask()) == 0, "host bits set");
    WHARF_FUZZ_CHECK(format_cidr(c) == text, "block does not round-trip");
    WHARF_FUZZ_CHECK(c.contains(c.base) && overlaps(c, c), "block does not contain itself");
  }
  uint32_t ip = 0;
  if (parse_ipv4(text, &ip))
    WHARF_FUZZ_CHECK(format_ipv4(ip) == text, "address does not round-trip");
  return 0;
}
