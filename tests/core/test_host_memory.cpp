// Tests of core/host_memory: memory a "step" frees is reused by the next one without page faults, and
// an environment that tunes malloc itself is left alone.
#include <catch2/catch_test_macros.hpp>

#include <malloc.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/host_memory.hpp"

using ppctl::core::keep_freed_host_memory;

namespace {

// Under AddressSanitizer or ThreadSanitizer (scripts/sanitize.sh) malloc is the sanitizer's allocator, not glibc's:
// mallopt does nothing there and returns 0, so the setting cannot apply and page faults say nothing about glibc.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerMalloc = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitizerMalloc = true;
#else
constexpr bool kSanitizerMalloc = false;
#endif
#else
constexpr bool kSanitizerMalloc = false;
#endif

constexpr size_t kBlock = 1 << 20;  // 1 MiB: above glibc's initial mmap threshold (128 KiB)
constexpr size_t kBlocks = 64;
constexpr long kPages = static_cast<long>(kBlock * kBlocks / 4096);

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

/// One "step": allocates 64 MiB in 1 MiB blocks (as posix_memalign, like LibTorch's CPU allocator),
/// writes every page, frees everything. Returns the minor page faults it took.
long step() {
  const long before = minor_faults();
  std::vector<void*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    void* block = nullptr;
    REQUIRE(posix_memalign(&block, 64, kBlock) == 0);
    std::memset(block, 1, kBlock);
    blocks.push_back(block);
  }
  for (void* block : blocks) std::free(block);
  return minor_faults() - before;
}

struct EnvVar {
  const char* name;
  EnvVar(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~EnvVar() { unsetenv(name); }
};

}  // namespace

TEST_CASE("host memory: under a sanitizer's malloc the setting says it did not apply") {
  if (!kSanitizerMalloc) SKIP("glibc's malloc: the next test case checks the setting itself");
  REQUIRE(std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr);
  CHECK(mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 0);  // the sanitizer's allocator ignores it
  const auto setting = keep_freed_host_memory();
  CHECK_FALSE(setting.applied);
  CHECK(setting.description.find("refused malloc's thresholds") != std::string::npos);
  // The steps themselves run clean under the sanitizer (no leak, no overflow).
  step();
  step();
}

TEST_CASE("host memory: after keep_freed_host_memory a step reuses what the last one freed") {
  if (kSanitizerMalloc) SKIP("a sanitizer's malloc: glibc's thresholds do not apply (previous test case)");
  REQUIRE(std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr);
  REQUIRE(std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr);
  // The control: with blocks mapped and unmapped each time (an explicit 128 KiB mmap threshold, which
  // also stops glibc raising it), every step faults in all of its pages. This shows the measurement
  // can see what the setting removes.
  REQUIRE(mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1);
  step();
  CHECK(step() >= kPages * 9 / 10);

  const auto setting = keep_freed_host_memory();
  CHECK(setting.applied);
  CHECK(setting.description.find("32 MiB") != std::string::npos);
  // The first steps grow the heap until it holds a step's blocks wherever they land: new pages.
  step();
  step();
  const long faults = step();
  INFO("minor page faults in a step after the first: " << faults << " (of " << kPages << " pages)");
  CHECK(faults < kPages / 10);
  CHECK(step() < kPages / 10);
}

TEST_CASE("host memory: malloc settings from the environment are left alone and named") {
  for (const auto& [name, value] :
       {std::pair{"MALLOC_TRIM_THRESHOLD_", "131072"}, std::pair{"MALLOC_MMAP_THRESHOLD_", "131072"},
        std::pair{"MALLOC_TOP_PAD_", "0"}, std::pair{"GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0"}}) {
    EnvVar variable(name, value);
    const auto setting = keep_freed_host_memory();
    CHECK_FALSE(setting.applied);
    CHECK(setting.description.find(name) != std::string::npos);
  }
  // A tunable for something else is not a malloc setting: not named, and (with glibc's malloc) applied.
  EnvVar other("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F");
  const auto setting = keep_freed_host_memory();
  CHECK(setting.description.find("GLIBC_TUNABLES") == std::string::npos);
  CHECK(setting.applied == !kSanitizerMalloc);
}
