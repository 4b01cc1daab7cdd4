// Fuzz target: the Megatron indexed dataset reader (data::MegatronSource: .idx header, arrays and their
// agreement with the .bin). Input: a 2-byte little-endian length L, then L bytes of PREFIX.idx, then
// PREFIX.bin. What opens and passes check_index must read its tokens without leaving the files.
#include <algorithm>
#include <vector>

#include "data/megatron_source.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t idx_bytes = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  const auto input = ppctl::fuzz::text_of(data + 2, size - 2);
  const std::string prefix = ppctl::fuzz::scratch_dir() + "/data";
  ppctl::fuzz::write_bytes(prefix + ".idx", input.substr(0, idx_bytes));
  ppctl::fuzz::write_bytes(prefix + ".bin", input.substr(idx_bytes));
  ppctl::fuzz::expect_only_documented_errors([&] {
    const ppctl::data::MegatronSource source(prefix);
    source.check_index();
    std::vector<int64_t> ids(static_cast<size_t>(std::min<int64_t>(source.num_tokens(), 4096)));
    source.read(0, static_cast<int64_t>(ids.size()), ids.data());
    (void)source.num_documents();
  });
  return 0;
}
