// Error types thrown by ppctl: one per module boundary, so app/ can map each to an exit code.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ppctl {

/// Base of every error ppctl throws on purpose. `what()` is a complete, user-facing message.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A job spec (YAML) is invalid. Holds every problem found, one line each, in the form
/// `FILE:LINE: PATH: value V: RULE (fix: HINT)`. `what()` joins them with newlines.
class ConfigError : public Error {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  std::vector<std::string> problems_;
};

/// The spec is valid YAML but cannot be laid out (e.g. more stages than layers).
class PlanError : public Error {
 public:
  using Error::Error;
};

/// A schedule (generated or read from a file) breaks a dependency or would deadlock.
class ScheduleError : public Error {
 public:
  using Error::Error;
};

/// Communication with a peer failed (connection lost, shape mismatch, bad environment).
class CommError : public Error {
 public:
  using Error::Error;
};

/// A blocking wait on communication ran past its timeout. Names the operation and the peer.
class CommTimeout : public CommError {
 public:
  using CommError::CommError;
};

/// A checkpoint is missing, incomplete, corrupt or does not fit the job spec. Names the file.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// Spawning or supervising worker processes failed, or a worker ended abnormally.
class LaunchError : public Error {
 public:
  using Error::Error;
};

/// A broken internal invariant: a bug in ppctl, never the user's fault.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace ppctl
