// Megatron indexed-dataset layout: dtype codes, .idx header parsing and .idx encoding.
#include "data/megatron_format.hpp"

#include <fmt/format.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstring>

#include "core/echo.hpp"
#include "core/check.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::data::megatron {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t size;
  bool integer;
};

constexpr std::array<DTypeInfo, 8> kDTypes{{
    {DType::kUint8, "uint8", 1, true},
    {DType::kInt8, "int8", 1, true},
    {DType::kInt16, "int16", 2, true},
    {DType::kInt32, "int32", 4, true},
    {DType::kInt64, "int64", 8, true},
    {DType::kFloat64, "float64", 8, false},
    {DType::kFloat32, "float32", 4, false},
    {DType::kUint16, "uint16", 2, true},
}};

const DTypeInfo& info(DType dtype) {
  const auto code = static_cast<size_t>(dtype);
  PPCTL_ASSERT(code >= 1 && code <= kDTypes.size(), "dtype code out of range");
  return kDTypes[code - 1];
}

template <typename T>
T read_le(std::string_view bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));  // hosts are little-endian (x86-64, arm64)
  return value;
}

template <typename T>
void append_le(std::string& out, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.append(raw, sizeof(T));
}

}  // namespace

std::optional<DType> dtype_from_code(uint8_t code) {
  if (code < 1 || code > kDTypes.size()) return std::nullopt;
  return static_cast<DType>(code);
}

int64_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }
bool is_integer(DType dtype) { return info(dtype).integer; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

DType optimal_dtype(int64_t vocab_size) { return vocab_size < 65500 ? DType::kUint16 : DType::kInt32; }

IndexHeader parse_index_header(std::string_view bytes, const std::string& path) {
  if (static_cast<int64_t>(bytes.size()) < kIndexHeaderBytes) {
    throw DataError(fmt::format("{}: {} bytes, shorter than the {}-byte header of a Megatron index (fix: "
                            "rewrite it with `ppctl data prepare` or Megatron's preprocess_data.py)",
                            core::echo_label(path), bytes.size(), kIndexHeaderBytes));
  }
  if (bytes.substr(0, kIndexMagic.size()) != kIndexMagic) {
    throw DataError(fmt::format("{}: bad magic: not a Megatron index (expected MMIDIDX\\0\\0 in the first 9 "
                            "bytes; fix: name the PREFIX of PREFIX.bin/PREFIX.idx written by "
                            "`ppctl data prepare` or Megatron's preprocess_data.py)",
                            core::echo_label(path)));
  }
  const auto version = read_le<uint64_t>(bytes, 9);
  if (version != kIndexVersion) {
    throw DataError(fmt::format("{}: index version {}, only version {} is supported (fix: rewrite it with "
                            "`ppctl data prepare`)",
                            core::echo_label(path), version, kIndexVersion));
  }
  const auto code = read_le<uint8_t>(bytes, 17);
  const auto dtype = dtype_from_code(code);
  if (!dtype) {
    throw DataError(fmt::format("{}: unknown dtype code {} (Megatron's codes are 1..8: uint8, int8, int16, "
                            "int32, int64, float64, float32, uint16; fix: rewrite the dataset)",
                            core::echo_label(path), code));
  }
  IndexHeader header;
  header.dtype = *dtype;
  header.sequence_count = read_le<uint64_t>(bytes, 18);
  header.document_count = read_le<uint64_t>(bytes, 26);
  return header;
}

int64_t index_file_bytes(const IndexHeader& header) {
  // Header counts come from the file: computed wide, so that no count can overflow the size.
  const unsigned __int128 bytes = static_cast<unsigned __int128>(kIndexHeaderBytes) +
                                  static_cast<unsigned __int128>(header.sequence_count) * (4 + 8) +
                                  static_cast<unsigned __int128>(header.document_count) * 8;
  return bytes > static_cast<unsigned __int128>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(bytes);
}

std::string encode_index(DType dtype, const std::vector<int64_t>& sequence_lengths,
                         const std::vector<int64_t>& document_indices) {
  const auto sequences = static_cast<int64_t>(sequence_lengths.size());
  PPCTL_ASSERT(!document_indices.empty() && document_indices.front() == 0,
               "document_indices must start with 0");
  PPCTL_ASSERT(document_indices.back() == sequences, "document_indices must end with the sequence count");
  for (size_t k = 1; k < document_indices.size(); ++k) {
    PPCTL_ASSERT(document_indices[k] >= document_indices[k - 1], "document_indices must not decrease");
  }
  std::string out;
  out.reserve(static_cast<size_t>(kIndexHeaderBytes + sequences * 12 +
                                  static_cast<int64_t>(document_indices.size()) * 8));
  out.append(kIndexMagic);
  append_le<uint64_t>(out, kIndexVersion);
  append_le<uint8_t>(out, static_cast<uint8_t>(dtype));
  append_le<uint64_t>(out, static_cast<uint64_t>(sequences));
  append_le<uint64_t>(out, static_cast<uint64_t>(document_indices.size()));
  for (int64_t length : sequence_lengths) {
    PPCTL_ASSERT(length >= 0 && length <= INT32_MAX, "sequence length out of int32 range");
    append_le<int32_t>(out, static_cast<int32_t>(length));
  }
  int64_t pointer = 0;
  for (int64_t length : sequence_lengths) {
    append_le<int64_t>(out, pointer);
    pointer += length * dtype_size(dtype);
  }
  for (int64_t doc : document_indices) append_le<int64_t>(out, doc);
  return out;
}

}  // namespace ppctl::data::megatron
