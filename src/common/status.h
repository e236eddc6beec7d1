// The result of an operation outside the data path: ok, or a code saying what kind of failure
// it was and a message for the log or the user (leveldb's Status).
#pragma once

#include <string>
#include <utility>

namespace wharf {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk,
    kNotFound,            // the key, object or lease does not exist
    kAlreadyExists,       // the object to create exists (or overlaps one that does)
    kFailedPrecondition,  // the state does not allow it (a tenant that still has networks)
    kExhausted,           // no address, LID or quota left
    kInvalidArgument,     // the request is malformed
    kCompacted,           // a watch asked for history the store no longer keeps
    kUnavailable,         // the store or peer could not be reached; retrying may help
    kInternal,            // the store failed or answered something we do not understand
  };

  Status() = default;
  static Status ok() { return Status(); }
  static Status error(Code code, std::string message) { return Status(code, std::move(message)); }

  bool is_ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace wharf
