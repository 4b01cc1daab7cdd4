// The format-independent part of token sources: id layouts and the conversion to int64, and the
// factory choosing the reader for data.format.
#include "data/token_source.hpp"

#include <cstring>

#include "core/check.hpp"
#include "data/flat_token_source.hpp"
#include "data/mapped_ids.hpp"
#include "data/megatron_source.hpp"
#include "data/text_source.hpp"

namespace ppctl::data {
namespace {

template <typename T>
void convert(const uint8_t* base, int64_t start, int64_t count, int64_t* out) {
  const uint8_t* p = base + start * static_cast<int64_t>(sizeof(T));
  for (int64_t k = 0; k < count; ++k) {
    T value;
    std::memcpy(&value, p + k * static_cast<int64_t>(sizeof(T)), sizeof(T));  // little-endian hosts
    out[k] = static_cast<int64_t>(value);
  }
}

}  // namespace

IdLayout id_layout(megatron::DType dtype) {
  PPCTL_ASSERT(megatron::is_integer(dtype), "id_layout of a floating-point dtype");
  const bool is_signed = dtype != megatron::DType::kUint8 && dtype != megatron::DType::kUint16;
  return {megatron::dtype_size(dtype), is_signed};
}

IdLayout id_layout(config::TokenDType dtype) {
  switch (dtype) {
    case config::TokenDType::Uint16: return {2, false};
    case config::TokenDType::Uint32: return {4, false};
    case config::TokenDType::Int32: return {4, true};
  }
  throw InternalError("id_layout: unknown TokenDType");
}

void copy_ids(const uint8_t* base, IdLayout layout, int64_t start, int64_t count, int64_t* out) {
  switch (layout.bytes * 2 + (layout.is_signed ? 1 : 0)) {
    case 2: return convert<uint8_t>(base, start, count, out);
    case 3: return convert<int8_t>(base, start, count, out);
    case 4: return convert<uint16_t>(base, start, count, out);
    case 5: return convert<int16_t>(base, start, count, out);
    case 8: return convert<uint32_t>(base, start, count, out);
    case 9: return convert<int32_t>(base, start, count, out);
    case 17: return convert<int64_t>(base, start, count, out);
    default: PPCTL_ASSERT(false, "copy_ids: unsupported id layout");
  }
}

void read_mapped_ids(const MappedFile& file, IdLayout layout, int64_t start, int64_t count, int64_t* out) {
  copy_ids(file.data(), layout, start, count, out);
  file.release_range(start * layout.bytes, count * layout.bytes);
}

std::unique_ptr<TokenSource> open_token_source(const config::DataSource& source) {
  switch (source.format) {
    case config::DataFormat::Text: return std::make_unique<TextSource>(source.files);
    case config::DataFormat::Tokens: return std::make_unique<FlatTokenSource>(source.files.at(0), source.dtype);
    case config::DataFormat::Megatron: return std::make_unique<MegatronSource>(source.files.at(0));
  }
  throw InternalError("open_token_source: unknown DataFormat");
}

}  // namespace ppctl::data
