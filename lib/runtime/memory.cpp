// Tensor memory accounting: a counting CPU allocator (c10::alloc_cpu behind a size header) and the
// CUDA caching allocator's statistics; ru_maxrss for the resident set.
#include "runtime/memory.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/resource.h>

#include <atomic>
#include <cstring>

namespace ppctl::runtime {
namespace {

// Each allocation carries its size in a header this long in front of the data; 64 keeps the data
// at c10's alignment (alloc_cpu returns 64-byte aligned blocks).
constexpr size_t kHeader = 64;

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void add_live(int64_t bytes) {
  const int64_t live = g_live.fetch_add(bytes) + bytes;
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
}

void counted_free(void* data) {
  if (data == nullptr) return;
  auto* base = static_cast<char*>(data) - kHeader;
  size_t bytes = 0;
  std::memcpy(&bytes, base, sizeof bytes);
  add_live(-static_cast<int64_t>(bytes));
  c10::free_cpu(base);
}

/// LibTorch's default CPU allocation (c10::alloc_cpu) with every live byte counted. The context of
/// each DataPtr is its data pointer, so raw allocation (raw_deleter) works as with the default.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &counted_free, c10::Device(c10::kCPU)};
    auto* base = static_cast<char*>(c10::alloc_cpu(bytes + kHeader));
    std::memcpy(base, &bytes, sizeof bytes);
    add_live(static_cast<int64_t>(bytes));
    void* data = base + kHeader;
    return {data, data, &counted_free, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

void install_counting_cpu_allocator() {
  // Never destroyed: tensors may outlive static destruction. The highest priority keeps it in
  // place.
  static const bool installed = [] {
    c10::SetCPUAllocator(new CountingCpuAllocator(), /*priority=*/255);
    return true;
  }();
  (void)installed;
}

constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

}  // namespace

MemoryMeter::MemoryMeter(c10::Device device) : device_(device) {
  if (device_.is_cpu()) install_counting_cpu_allocator();
}

MemoryCounts MemoryMeter::read() const {
  if (device_.is_cpu()) return {g_live.load(), g_peak.load()};
  const auto stats = c10::getDeviceAllocator(device_.type())->getDeviceStats(device_.index());
  return {stats.allocated_bytes[kAggregate].current, stats.allocated_bytes[kAggregate].peak};
}

void MemoryMeter::reset_peak() {
  if (device_.is_cpu()) {
    g_peak.store(g_live.load());
  } else {
    c10::getDeviceAllocator(device_.type())->resetPeakStats(device_.index());
  }
}

int64_t max_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace ppctl::runtime
