// Test support: the message of the error a call throws, for tests that check what users are told.
#pragma once

#include <catch2/catch_test_macros.hpp>
#include <string>

namespace ppctl::test {

/// The what() of the `Error` that `call()` throws; fails the test with `accepted` when it throws
/// none.
template <typename Error, typename Call>
std::string message_of(const Call& call, const std::string& accepted) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL(accepted);
  return {};
}

}  // namespace ppctl::test
