// The byte layout of a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx): constants, dtype codes,
// parsing of the .idx header and encoding of a whole .idx. Source of truth: megatron-core 0.16.1,
// megatron/core/datasets/indexed_dataset.py (_INDEX_HEADER, DType, _IndexWriter, _IndexReader). No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppctl::data::megatron {

/// The first 9 bytes of every .idx file: "MMIDIDX" followed by two zero bytes (_INDEX_HEADER).
inline constexpr std::string_view kIndexMagic{"MMIDIDX\x00\x00", 9};
/// The only index version Megatron writes and reads (a little-endian uint64 after the magic).
inline constexpr uint64_t kIndexVersion = 1;
/// Bytes before the arrays: magic (9) + version (8) + dtype code (1) + sequence count (8) +
/// document count (8) = 34, as _IndexReader's `offset = 34`.
inline constexpr int64_t kIndexHeaderBytes = 34;

/// Element type of the .bin file, with Megatron's DType codes (indexed_dataset.py, class DType).
enum class DType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

/// The dtype with Megatron code `code`, or nullopt for a code outside 1..8.
std::optional<DType> dtype_from_code(uint8_t code);
/// Bytes per element: 1, 1, 2, 4, 8, 8, 4, 2 for codes 1..8.
int64_t dtype_size(DType dtype);
/// numpy's name of the dtype ("uint8", "int8", "int16", "int32", "int64", "float64", "float32",
/// "uint16").
std::string_view dtype_name(DType dtype);
/// The dtype named `name` (numpy names as above), or nullopt.
std::optional<DType> dtype_from_name(std::string_view name);
/// True for the integer dtypes a token id can be stored in (all but float32 and float64).
bool is_integer(DType dtype);
/// The narrowest dtype Megatron picks for a vocabulary of `vocab_size` ids (DType.optimal_dtype:
/// uint16 below 65500, else int32).
DType optimal_dtype(int64_t vocab_size);

/// The fixed-size part of an .idx file.
struct IndexHeader {
  DType dtype = DType::kInt32;
  uint64_t sequence_count = 0;  ///< S: entries of the sequence-length and sequence-pointer arrays.
  uint64_t document_count = 0;  ///< D: entries of the document-index array (documents + 1).
};

/// Parses the first kIndexHeaderBytes of an .idx. Throws ppctl::Error naming `path` (used in the
/// message only) when the file is shorter than the header, the magic is not kIndexMagic, the
/// version is not 1, or the dtype code is unknown.
IndexHeader parse_index_header(std::string_view bytes, const std::string& path);

/// Size in bytes of a complete .idx with `header`: 34 + 4 S (int32 lengths) + 8 S (int64 byte
/// pointers) + 8 D (int64 document indices). Megatron's multimodal mode array (int8 [S]) is not
/// part of ppctl's layout: a longer file is accepted, its tail ignored. INT64_MAX when the counts (read
/// from a file, so possibly damaged) need more.
int64_t index_file_bytes(const IndexHeader& header);

/// The complete .idx content for a .bin of `dtype` elements holding sequences of
/// `sequence_lengths` tokens back to back (one sequence per document when the caller writes it so),
/// with `document_indices` the sequence index at which each document starts plus the final S
/// (Megatron's document_indices: starts with 0, non-decreasing, ends with S). Byte pointers are the
/// running sums of length x dtype_size, as _IndexWriter._sequence_pointers. Little-endian.
/// Throws ppctl::InternalError when document_indices does not start at 0, decreases, or does not
/// end at S, or when a length is negative or above INT32_MAX.
std::string encode_index(DType dtype, const std::vector<int64_t>& sequence_lengths,
                         const std::vector<int64_t>& document_indices);

}  // namespace ppctl::data::megatron
