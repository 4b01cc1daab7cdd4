// TFRecord framing (see tfrecord.hpp).
#include "interop/tfrecord.hpp"

#include <cstdint>

#include "interop/crc32c.hpp"

namespace ppctl::interop {
namespace {

/// Appends the `bytes` low bytes of `value`, least significant first.
void append_le(std::string& out, uint64_t value, int bytes) {
  for (int k = 0; k < bytes; ++k) out.push_back(static_cast<char>((value >> (8 * k)) & 0xFFu));
}

}  // namespace

std::string tfrecord_frame(std::string_view data) {
  std::string out;
  out.reserve(data.size() + kTfRecordOverhead);
  append_le(out, data.size(), 8);
  append_le(out, mask_crc32c(crc32c(out)), 4);  // out holds just the length here
  out.append(data);
  append_le(out, mask_crc32c(crc32c(data)), 4);
  return out;
}

}  // namespace ppctl::interop
