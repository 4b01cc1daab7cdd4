// MegatronSource: opening and checking an indexed dataset, reading windows of its .bin.
#include "data/megatron_source.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/echo.hpp"
#include "core/bad_input.hpp"
#include "core/check.hpp"
#include "data/mapped_ids.hpp"

namespace ppctl::data {
namespace {

template <typename T>
T entry(const MappedFile& file, int64_t offset) {
  T value;
  std::memcpy(&value, file.data() + offset, sizeof(T));
  return value;
}

MappedFile map_part(const std::string& prefix, const char* extension) {
  try {
    return MappedFile(prefix + extension);
  } catch (const Error& e) {
    throw DataError(fmt::format("{} (a Megatron dataset named by data.path PREFIX needs PREFIX.bin and PREFIX.idx; fix: "
                            "check the prefix, e.g. corpus/train_text_document for "
                            "corpus/train_text_document.bin)",
                            e.what()));
  }
}

megatron::IndexHeader read_header(const MappedFile& idx) {
  const std::string_view bytes(reinterpret_cast<const char*>(idx.data()),
                               static_cast<size_t>(std::min<int64_t>(idx.size(), megatron::kIndexHeaderBytes)));
  return megatron::parse_index_header(bytes, idx.path());
}

}  // namespace

MegatronSource::MegatronSource(const std::string& prefix)
    : prefix_(prefix), idx_(map_part(prefix, ".idx")), bin_(map_part(prefix, ".bin")), header_(read_header(idx_)) {
  if (!megatron::is_integer(header_.dtype)) {
    throw DataError(fmt::format("{}: dtype {} holds no token ids (fix: write the dataset with an integer dtype, "
                            "uint16 or int32)",
                            core::echo_label(idx_.path()), megatron::dtype_name(header_.dtype)));
  }
  layout_ = id_layout(header_.dtype);
  if (header_.sequence_count > (1ULL << 40) || header_.document_count > (1ULL << 40) ||
      idx_.size() < megatron::index_file_bytes(header_)) {
    throw DataError(fmt::format("{}: {} bytes, but its header counts {} sequences and {} document-index entries, "
                            "which need {} bytes (truncated or damaged; fix: rewrite the dataset)",
                            core::echo_label(idx_.path()), idx_.size(), header_.sequence_count, header_.document_count,
                            megatron::index_file_bytes(header_)));
  }
  const auto sequences = static_cast<int64_t>(header_.sequence_count);
  // The last sequence's byte pointer and length come from the file: an end past INT64_MAX is a mismatch.
  int64_t expected = 0;
  const bool overflow = sequences > 0 && __builtin_add_overflow(sequence_start(sequences - 1) * layout_.bytes,
                                                                 sequence_length(sequences - 1) * layout_.bytes,
                                                                 &expected);
  if (overflow || expected != bin_.size()) {
    throw DataError(fmt::format("{}: the index does not match {}: its last sequence ends at byte {}, the .bin has {} "
                            "bytes (fix: the two files come from different runs; rewrite the dataset)",
                            core::echo_label(idx_.path()), core::echo_label(bin_.path()), expected, bin_.size()));
  }
}

int64_t MegatronSource::num_documents() const {
  return header_.document_count == 0 ? 0 : static_cast<int64_t>(header_.document_count) - 1;
}

int64_t MegatronSource::sequence_length(int64_t sequence) const {
  return entry<int32_t>(idx_, megatron::kIndexHeaderBytes + 4 * sequence);
}

int64_t MegatronSource::sequence_start(int64_t sequence) const {
  const auto sequences = static_cast<int64_t>(header_.sequence_count);
  return entry<int64_t>(idx_, megatron::kIndexHeaderBytes + 4 * sequences + 8 * sequence) / layout_.bytes;
}

int64_t MegatronSource::document_index(int64_t k) const {
  const auto sequences = static_cast<int64_t>(header_.sequence_count);
  return entry<int64_t>(idx_, megatron::kIndexHeaderBytes + 12 * sequences + 8 * k);
}

void MegatronSource::check_index() const {
  const auto sequences = static_cast<int64_t>(header_.sequence_count);
  const auto documents = static_cast<int64_t>(header_.document_count);
  int64_t pointer = 0;
  const int64_t pointers = megatron::kIndexHeaderBytes + 4 * sequences;
  for (int64_t k = 0; k < sequences; ++k) {
    const int64_t length = sequence_length(k);
    const auto at = entry<int64_t>(idx_, pointers + 8 * k);
    if (length < 0 || at != pointer) {
      throw DataError(fmt::format("{}: sequence {} has length {} and byte pointer {}, but the sequences before it end "
                              "at byte {} (damaged index; fix: rewrite the dataset)",
                              core::echo_label(idx_.path()), k, length, at, pointer));
    }
    pointer += length * layout_.bytes;
  }
  if (documents < 1) {
    throw DataError(fmt::format("{}: the document index is empty (Megatron writes at least its leading 0; damaged "
                            "index; fix: rewrite the dataset)",
                            core::echo_label(idx_.path())));
  }
  int64_t previous = 0;
  for (int64_t k = 0; k < documents; ++k) {
    const int64_t doc = document_index(k);
    if ((k == 0 && doc != 0) || doc < previous || doc > sequences || (k == documents - 1 && doc != sequences)) {
      throw DataError(fmt::format("{}: document-index entry {} is {} (entries must start at 0, never decrease and end "
                              "at the sequence count {}; damaged index; fix: rewrite the dataset)",
                              core::echo_label(idx_.path()), k, doc, sequences));
    }
    previous = doc;
  }
  idx_.release_pages();
}

void MegatronSource::read(int64_t start, int64_t count, int64_t* out) const {
  PPCTL_ASSERT(start >= 0 && count >= 0 && start + count <= num_tokens(), "token read outside the .bin");
  read_mapped_ids(bin_, layout_, start, count, out);
}

std::string MegatronSource::describe() const { return fmt::format("{} (megatron, {})", prefix_, megatron::dtype_name(header_.dtype)); }

}  // namespace ppctl::data
