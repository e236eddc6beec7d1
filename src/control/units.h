// Rates and sizes as operators write them, in tc's manner: "100mbit", "1gbit", "2.5gbit",
// "125mbps" (bytes), "64kb". Used by wharfctl; the API itself takes plain integers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wharf::control {

// Bits per second: NUMBER[.FRACTION][UNIT], UNIT (any case) one of bit kbit mbit gbit tbit (powers
// of 1000), kibit mibit gibit tibit (powers of 1024), bps kbps mbps gbps tbps (bytes, times 8); no
// unit means bit/s. False for anything else, a negative number or an overflow; *why says which.
bool parse_rate(std::string_view text, uint64_t* bps, std::string* why);
// Bytes: NUMBER[.FRACTION][UNIT], UNIT (any case) one of b k kb m mb g gb t tb (powers of 1024).
bool parse_size(std::string_view text, uint64_t* bytes, std::string* why);
// The largest of gbit, mbit, kbit, bit that shows the rate as a whole number ("1gbit").
std::string format_rate(uint64_t bps);

}  // namespace wharf::control
