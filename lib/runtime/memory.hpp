// Tensor memory accounting for the executor: bytes of live tensors on a device and their
// high-water mark (a counting CPU allocator; the CUDA caching allocator's statistics), and the
// process's peak resident set.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace ppctl::runtime {

/// Bytes of tensor memory on one device.
struct MemoryCounts {
  int64_t live = 0;  ///< held by tensors now
  int64_t peak = 0;  ///< the most held at any moment since the last reset_peak()
};

/// Reads the tensor memory of one device. On the CPU, constructing the first meter installs a
/// counting allocator as LibTorch's CPU allocator (once per process, for the rest of it): tensors
/// allocated before that are not counted, which is fine for differences taken later. On CUDA it
/// reads the caching allocator's statistics (allocated bytes, not the cache it reserves).
class MemoryMeter {
 public:
  explicit MemoryMeter(c10::Device device);
  MemoryCounts read() const;
  /// Starts a new high-water mark at the current live bytes.
  void reset_peak();

 private:
  c10::Device device_;
};

/// The peak resident set size of this process so far (getrusage ru_maxrss), in bytes.
int64_t max_resident_bytes();

}  // namespace ppctl::runtime
