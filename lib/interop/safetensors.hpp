// The safetensors file format (https://huggingface.co/docs/safetensors, reference implementation
// github.com/huggingface/safetensors): a memory-mapped reader and an atomic writer. No C++ safetensors
// library is packaged in Debian 12, so this small one is built on nlohmann-json, which ppctl already
// uses. Torch-free: tensors are exposed as raw bytes and converted to fp32 on request.
//
// Layout: u64 little-endian N, then N bytes of UTF-8 JSON {"NAME": {"dtype": "F32", "shape": [..],
// "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"k": "v"}} (padded with spaces so that the data
// start 8-byte aligned), then the data buffer; offsets are relative to the buffer, row-major,
// little-endian, and the tensors tile the buffer without holes or overlaps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ppctl::interop {

/// One tensor's entry in a safetensors header. `begin`/`end` are byte offsets into the data buffer.
struct TensorInfo {
  std::string name;
  std::string dtype;            ///< as the file spells it: F32, F16, BF16, F64, I64, I32, ...
  std::vector<int64_t> shape;   ///< row-major sizes; empty for a scalar
  uint64_t begin = 0;
  uint64_t end = 0;
  int64_t numel() const;
};

/// Bytes per element of a safetensors dtype name; 0 when the name is not one of the format's dtypes.
size_t dtype_size(const std::string& dtype);

/// A safetensors file opened read-only and memory-mapped: opening reads and validates the header
/// only (the pages of the data are touched only by read_f32 / read_f32_block / data of the elements asked for).
/// Throws ppctl::CheckpointError naming the file and the rule on: a file shorter than 8 bytes, a
/// header length of 0, above 100 MB or past the end of the file, a header that is not a JSON object
/// of tensor entries, an unknown dtype, a negative shape, data_offsets that disagree with
/// dtype x shape, overlap, leave holes or reach past the end of the file (a truncated file), or
/// bytes after the last tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Every tensor, by name.
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  /// The entry of `name`, or null when the file has none.
  const TensorInfo* find(const std::string& name) const;
  /// `__metadata__` (string to string); empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// The raw little-endian bytes of tensor `info` (an entry of this file): a view into the mapping.
  const unsigned char* data(const TensorInfo& info) const;

  /// Tensor `name` converted to fp32, row-major (numel values). F32, F16 and BF16 are converted
  /// exactly (IEEE half and bfloat16 widen losslessly). Throws ppctl::CheckpointError naming the
  /// tensor and file when it is missing or of another dtype.
  std::vector<float> read_f32(const std::string& name) const;

  /// Rows [row_begin, row_begin + rows) x columns [col_begin, col_begin + cols) of tensor `info` (an entry of this
  /// file) viewed as a matrix [shape[0], numel / shape[0]] (a vector: one column; a scalar: [1, 1]), converted to
  /// fp32 as read_f32 does: row i of the block goes to out[i * out_stride ...]. Only the block's bytes are read from
  /// the mapping (a column range: one run per row). Returns the bytes read (elements x dtype size). Throws
  /// ppctl::CheckpointError naming the tensor and file for a dtype other than F32, F16, BF16, and
  /// ppctl::InternalError when the block lies outside the tensor or out_stride < cols.
  uint64_t read_f32_block(const TensorInfo& info, int64_t row_begin, int64_t rows, int64_t col_begin, int64_t cols,
                          float* out, int64_t out_stride) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  void* map_ = nullptr;
  size_t size_ = 0;
  uint64_t data_start_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor to write: fp32 values (row-major, product of `shape` of them) that outlive the call.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* values = nullptr;
};

/// Bytes the file write_safetensors writes for `tensors` would hold in its data buffer.
uint64_t safetensors_data_bytes(const std::vector<TensorToWrite>& tensors);

/// Writes `tensors` as dtype F32 (in the given order) with `metadata` as `__metadata__` to `path`,
/// atomically: the bytes go to PATH.tmp.PID, which is fsync'ed and renamed over `path`, and the folder
/// fsync'ed. The header is padded with spaces to a multiple of 8 bytes (as the reference writer does).
/// Throws ppctl::Error naming the file on an I/O failure (the temporary file is removed), and
/// ppctl::InternalError on duplicate names or a null `values` with a non-empty shape.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace ppctl::interop
