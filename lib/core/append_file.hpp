// Append-only files whose records land whole or not at all (metrics.jsonl, TensorBoard event files):
// a failed write (a full disk) is cut back to the last whole record and reported in plain words.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ppctl::core {

/// A file that grows by whole records. Each append hands the record to write(2) (looping over short
/// writes); when a write fails, the file is truncated back to its length before the record, so a
/// reader never sees a record cut short, and ppctl::Error is thrown naming the file, the reason
/// (strerror, e.g. "No space left on device") and the fix.
class AppendOnlyFile {
 public:
  /// Takes over `fd` (open for writing with O_APPEND) of the file `path`; `what` names the file in
  /// messages ("the metrics file").
  AppendOnlyFile(std::filesystem::path path, int fd, std::string what);
  /// Creates or truncates `path` and opens it for appending. Throws ppctl::Error naming it.
  static AppendOnlyFile create(std::filesystem::path path, std::string what);
  ~AppendOnlyFile();
  AppendOnlyFile(AppendOnlyFile&& other) noexcept;
  AppendOnlyFile& operator=(AppendOnlyFile&& other) noexcept;
  AppendOnlyFile(const AppendOnlyFile&) = delete;
  AppendOnlyFile& operator=(const AppendOnlyFile&) = delete;

  /// Appends `record` whole, or not at all: throws ppctl::Error "cannot write WHAT PATH: REASON (the
  /// record was not written; the file keeps its whole records) (fix: ...)" after cutting the file back.
  void append(std::string_view record);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string what_;
  long long length_ = 0;  ///< bytes of whole records written so far
};

}  // namespace ppctl::core
