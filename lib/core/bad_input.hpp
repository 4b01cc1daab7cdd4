// The error types of bad input that can also be found after validation (data files, addresses from
// the environment), and the one rule for which errors are bad input: exit code 2, never retried.
#pragma once

#include <exception>

#include "core/error.hpp"

namespace ppctl {

/// A data file (data.path, data.blend[i].path) is missing, unreadable, or not in the format the spec
/// names (bad magic, sizes that do not add up, too short). Names the file and the rule.
class DataError : public Error {
 public:
  using Error::Error;
};

/// An address the user gave (MASTER_ADDR, runtime.master_addr) cannot be used: it does not resolve,
/// or it is not an address of this machine where the store must listen. Names the variable, the
/// value and the fix.
class AddressError : public CommError {
 public:
  using CommError::CommError;
};

/// True when `e` reports bad input, which retrying cannot fix (exit code 2): ConfigError, PlanError,
/// ScheduleError, CheckpointError, DataError (and prepare::PrepareError, derived from it), AddressError.
bool is_bad_input(const std::exception& e);

}  // namespace ppctl
