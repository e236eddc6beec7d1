// Whole files the control plane keeps beside its store or a router's: tokens, keys,
// certificates.
#pragma once

#include <sys/types.h>

#include <string>

namespace wharf::control {

// Writes `text` to `path` with `mode`: a new file renamed over the old, so no reader ever
// sees a part of it and no earlier mode survives (a key written 0600 was never readable by
// others, not even for a moment). False if it could not (errno says why).
bool write_file_replacing(const std::string& path, const std::string& text, mode_t mode);

// The whole of `path`; false if it cannot be read.
bool read_whole_file(const std::string& path, std::string* out);

}  // namespace wharf::control
