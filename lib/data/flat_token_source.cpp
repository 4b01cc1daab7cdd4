// FlatTokenSource: size check and reads of a flat token file.
#include "data/flat_token_source.hpp"

#include <fmt/format.h>

#include "core/echo.hpp"
#include "core/bad_input.hpp"
#include "core/check.hpp"
#include "data/mapped_ids.hpp"

namespace ppctl::data {

FlatTokenSource::FlatTokenSource(const std::string& path, config::TokenDType dtype)
    : file_(path), dtype_(dtype), layout_(id_layout(dtype)) {
  if (file_.size() % layout_.bytes != 0) {
    throw DataError(fmt::format("{}: {} bytes is not a whole number of {}-byte {} ids (fix: check data.dtype; "
                            "a nanoGPT train.bin is uint16)",
                            core::echo_label(path), file_.size(), layout_.bytes, config::to_string(dtype)));
  }
}

void FlatTokenSource::read(int64_t start, int64_t count, int64_t* out) const {
  PPCTL_ASSERT(start >= 0 && count >= 0 && start + count <= num_tokens(), "token read outside the file");
  read_mapped_ids(file_, layout_, start, count, out);
}

std::string FlatTokenSource::describe() const {
  return fmt::format("{} (tokens, {})", file_.path(), config::to_string(dtype_));
}

}  // namespace ppctl::data
