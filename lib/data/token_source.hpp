// One interface for every stored corpus: a stream of token ids with a length, windows read on
// demand, and a document count. text_source, flat_token_source and megatron_source implement it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/job_spec.hpp"
#include "data/megatron_format.hpp"

namespace ppctl::data {

/// A corpus as one stream of token ids 0 .. num_tokens() - 1 (documents back to back, in file
/// order). Implementations memory-map their files and copy only what read() asks for.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  /// Tokens in the stream.
  virtual int64_t num_tokens() const = 0;
  /// Documents in the stream (text: files; tokens: 1; megatron: the index's documents).
  virtual int64_t num_documents() const = 0;
  /// Writes the ids of tokens [start, start + count) to out[0 .. count). Asserts (InternalError)
  /// that the range lies in the stream.
  virtual void read(int64_t start, int64_t count, int64_t* out) const = 0;
  /// What the source is, for messages: its path or prefix and format.
  virtual std::string describe() const = 0;
};

/// How one stored id is laid out: a little-endian integer of `bytes` bytes, signed or not.
struct IdLayout {
  int64_t bytes = 2;
  bool is_signed = false;
};
/// The layout of Megatron dtype `dtype` (an integer dtype; asserts otherwise).
IdLayout id_layout(megatron::DType dtype);
/// The layout of a `tokens` file of data.dtype `dtype`.
IdLayout id_layout(config::TokenDType dtype);

/// Converts `count` ids of `layout` starting at element `start` of `base` to int64 in `out`.
void copy_ids(const uint8_t* base, IdLayout layout, int64_t start, int64_t count, int64_t* out);

/// Opens `source` (a resolved data.path or data.blend entry) for reading windows: maps the files and
/// checks what is O(1) to check (sizes, the .idx header, the .bin size the index implies).
/// Throws ppctl::Error naming the file on any problem; data::check_data does the full checks first.
std::unique_ptr<TokenSource> open_token_source(const config::DataSource& source);

}  // namespace ppctl::data
