// The indexed dataset writer: buffered .bin writes, the .idx from data::megatron::encode_index, renames.
#include "prepare/indexed_writer.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <numeric>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace ppctl::prepare {
namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw Error(fmt::format("cannot {} {}: {} (fix: check the disk space and the folder's permissions)",
                          what, path, std::strerror(error)));
}

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", path, errno);
    data += n;
    size -= static_cast<size_t>(n);
  }
}

/// Writes `bytes` to a new file `path` and fsyncs it.
void write_synced(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", path, errno);
  try {
    write_all(fd, bytes.data(), bytes.size(), path);
    if (::fsync(fd) != 0) fail("sync", path, errno);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void remove_if_there(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("remove the old", path, errno);
}

void rename_onto(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail("rename the finished file onto", to, errno);
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, data::megatron::DType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  if (dtype_ != data::megatron::DType::kUint8 && dtype_ != data::megatron::DType::kUint16 &&
      dtype_ != data::megatron::DType::kInt32) {
    throw InternalError("IndexedDatasetWriter: only uint8, uint16 and int32 files are written");
  }
  const std::string suffix = fmt::format(".tmp.{}", ::getpid());
  bin_tmp_ = prefix_ + ".bin" + suffix;
  idx_tmp_ = prefix_ + ".idx" + suffix;
  sidecar_tmp_ = prefix_ + ".tokenizer.json" + suffix;
  fd_ = ::open(bin_tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", bin_tmp_, errno);
  buffer_.reserve(kBufferBytes);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    for (const auto* path : {&bin_tmp_, &idx_tmp_, &sidecar_tmp_}) ::unlink(path->c_str());
  }
}

int64_t IndexedDatasetWriter::bin_bytes() const { return tokens_ * data::megatron::dtype_size(dtype_); }

void IndexedDatasetWriter::add_document(const std::vector<int32_t>& ids) {
  const size_t width = static_cast<size_t>(data::megatron::dtype_size(dtype_));
  const int64_t largest = width == 1 ? 0xff : width == 2 ? 0xffff : INT32_MAX;
  size_t done = 0;
  while (done < ids.size()) {
    if (buffer_.size() + width > kBufferBytes) flush();
    // As many ids as fit the buffer, little-endian (numpy's tobytes on the machines Megatron runs on).
    const size_t count = std::min(ids.size() - done, (kBufferBytes - buffer_.size()) / width);
    const size_t at = buffer_.size();
    buffer_.resize(at + count * width);
    auto* out = reinterpret_cast<unsigned char*>(buffer_.data() + at);
    for (size_t k = 0; k < count; ++k) {
      const int32_t id = ids[done + k];
      if (id < 0 || id > largest) {
        buffer_.resize(at);
        throw InternalError(fmt::format("token id {} does not fit the dataset's {}", id,
                                        data::megatron::dtype_name(dtype_)));
      }
      const auto value = static_cast<uint32_t>(id);
      for (size_t b = 0; b < width; ++b) *out++ = static_cast<unsigned char>(value >> (8 * b));
      if (id > max_id_) max_id_ = id;
    }
    done += count;
  }
  lengths_.push_back(static_cast<int64_t>(ids.size()));
  tokens_ += static_cast<int64_t>(ids.size());
}

void IndexedDatasetWriter::flush() {
  write_all(fd_, buffer_.data(), buffer_.size(), bin_tmp_);
  buffer_.clear();
}

void IndexedDatasetWriter::commit(std::string_view sidecar) {
  stage(sidecar);
  publish();
}

void IndexedDatasetWriter::stage(std::optional<std::string_view> sidecar) {
  flush();
  if (::fsync(fd_) != 0) fail("sync", bin_tmp_, errno);
  ::close(fd_);
  fd_ = -1;
  std::vector<int64_t> document_indices(lengths_.size() + 1);
  std::iota(document_indices.begin(), document_indices.end(), int64_t{0});
  write_synced(idx_tmp_, data::megatron::encode_index(dtype_, lengths_, document_indices));
  has_sidecar_ = sidecar.has_value();
  if (has_sidecar_) write_synced(sidecar_tmp_, *sidecar);
}

void IndexedDatasetWriter::publish() {
  if (has_sidecar_) remove_if_there(prefix_ + ".tokenizer.json");
  remove_if_there(prefix_ + ".idx");
  rename_onto(bin_tmp_, prefix_ + ".bin");
  rename_onto(idx_tmp_, prefix_ + ".idx");
  if (has_sidecar_) rename_onto(sidecar_tmp_, prefix_ + ".tokenizer.json");
  committed_ = true;
  const auto folder = std::filesystem::path(prefix_).parent_path();
  core::sync_directory(folder.empty() ? std::filesystem::path(".") : folder);
}

}  // namespace ppctl::prepare
