// Errors that stop a command: usage, configuration and infrastructure faults.
// Outcomes of untrusted candidates are values (TurnOutcome), never these.
#pragma once
#include <stdexcept>
#include <string>

namespace leap {

class LeapError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws LeapError with the message and strerror(errno).
[[noreturn]] void throw_errno(const std::string& what);

}  // namespace leap
