// error_text: strip LibTorch's backtraces from messages shown to users.
#include "comm/error_text.hpp"

#include <c10/util/Exception.h>

namespace ppctl::comm {

std::string error_text(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

}  // namespace ppctl::comm
