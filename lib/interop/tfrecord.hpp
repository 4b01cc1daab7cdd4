// TFRecord framing, the container of TensorBoard event files. Torch-free.
//
// One record: u64 little-endian length N, u32 LE masked CRC-32C of those 8 length bytes, the N data
// bytes, u32 LE masked CRC-32C of the data (TensorFlow's tensorflow/core/lib/io/record_writer.cc;
// TensorBoard's reader checks both checksums and stops at a record cut short).
#pragma once

#include <string>
#include <string_view>

namespace ppctl::interop {

/// Bytes of the framing around one record, besides its data: 8 + 4 + 4.
inline constexpr size_t kTfRecordOverhead = 16;

/// `data` framed as one TFRecord (size data.size() + kTfRecordOverhead).
std::string tfrecord_frame(std::string_view data);

}  // namespace ppctl::interop
