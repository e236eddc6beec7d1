// The credential a client of the orchestrator presents (wharfctl, wharfd's agents, wharf-run;
// docs/SECURITY.md): a bearer token (control/tokens.h) from a file or the environment.
#pragma once

#include <string>

namespace wharf::control {

// Where a client's token comes from: `file` when it is not empty, else the file
// $WHARF_TOKEN_FILE names, else $WHARF_TOKEN, else `last_resort` (a file: a router's host
// token from joining the cluster), else nowhere (the orchestrator answers 401). A file is
// read at every get(), so a long-running client (a router) picks up a rotated token, and one
// that does not exist yet (an orchestrator started after the router) is waited for.
class TokenSource {
 public:
  explicit TokenSource(const std::string& file, const std::string& last_resort = "");

  // The token now ("" from nowhere); false, with *why, when the file cannot be read or holds
  // no token. Surrounding white space is not part of a token.
  bool get(std::string* token, std::string* why) const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::string fixed_;  // $WHARF_TOKEN's, when there is no file
};

}  // namespace wharf::control
