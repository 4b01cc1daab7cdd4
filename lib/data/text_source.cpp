// TextSource: reads across the boundaries of the concatenated, mapped files.
#include "data/text_source.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "data/mapped_ids.hpp"

namespace ppctl::data {

TextSource::TextSource(const std::vector<std::string>& files) {
  for (const auto& path : files) {
    files_.emplace_back(path);
    starts_.push_back(total_);
    total_ += files_.back().size();
  }
}

void TextSource::read(int64_t start, int64_t count, int64_t* out) const {
  PPCTL_ASSERT(start >= 0 && count >= 0 && start + count <= total_, "text read outside the stream");
  // The last file starting at or before `start`, then forward across files.
  auto k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  int64_t done = 0;
  while (done < count) {
    const int64_t offset = start + done - starts_[k];
    const int64_t n = std::min(count - done, files_[k].size() - offset);
    read_mapped_ids(files_[k], {1, false}, offset, n, out + done);
    done += n;
    ++k;
  }
}

std::string TextSource::describe() const {
  return files_.size() == 1 ? fmt::format("{} (text)", files_[0].path())
                            : fmt::format("{} text files ({}, ...)", files_.size(), files_[0].path());
}

}  // namespace ppctl::data
