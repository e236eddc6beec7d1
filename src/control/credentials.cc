#include "control/credentials.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace wharf::control {
namespace {

std::string trimmed(const std::string& s) {
  const char* space = " \t\r\n";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

std::string env(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

TokenSource::TokenSource(const std::string& file, const std::string& last_resort) {
  file_ = !file.empty() ? file : env("WHARF_TOKEN_FILE");
  if (!file_.empty()) return;
  fixed_ = trimmed(env("WHARF_TOKEN"));
  if (fixed_.empty()) file_ = last_resort;
}

bool TokenSource::get(std::string* token, std::string* why) const {
  if (file_.empty()) {
    *token = fixed_;
    return true;
  }
  std::ifstream in(file_);
  if (!in) {
    *why = "cannot read the token file " + file_ + ": " + std::strerror(errno);
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  *token = trimmed(text.str());
  if (!token->empty()) return true;
  *why = "the token file " + file_ + " is empty";
  return false;
}

}  // namespace wharf::control
