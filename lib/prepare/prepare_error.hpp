// The error `ppctl data prepare` throws for bad input (exit code 2): an input, model or output that
// cannot be used, named with the file (and line) and the fix.
#pragma once

#include "core/bad_input.hpp"

namespace ppctl::prepare {

/// Bad input to `ppctl data prepare`: a missing or unreadable input file, a JSONL line that is not
/// JSON or lacks the text field, an unusable tokenizer model, an output folder that does not exist.
/// `what()` names the file (and line) and says how to fix it. Failures of the machine itself (disk
/// full) are plain ppctl::Error.
class PrepareError : public DataError {
 public:
  using DataError::DataError;
};

/// A stop signal (SIGINT, SIGTERM, SIGHUP, ...) reached `ppctl data prepare`: it stopped before the next
/// document, and the writers removed their temporaries. The command exits 128 + signal().
class PrepareInterrupted : public Error {
 public:
  PrepareInterrupted(const std::string& what, int signal) : Error(what), signal_(signal) {}
  int signal() const noexcept { return signal_; }

 private:
  int signal_;
};

}  // namespace ppctl::prepare
