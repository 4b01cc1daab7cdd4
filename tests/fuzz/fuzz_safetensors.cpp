// Fuzz target: the safetensors reader (interop::SafetensorsFile: header parsing and validation over the
// memory map, fp32 conversion) and a Hugging Face folder holding the file (interop::HfFolder: checking and
// reading a tiny GPT-2's and a tiny Qwen2's tensors). Input: the bytes of model.safetensors. What opens must
// describe tensors that lie inside the file, whose reads give exactly numel values.
#include <cstdlib>
#include <string>

#include "fuzz_support.hpp"
#include "interop/hf_folder.hpp"
#include "interop/safetensors.hpp"

namespace {

/// The tiny models the seeds (tests/fuzz/safetensors/) hold, so that mutations reach check and read.
ppctl::config::ModelSpec tiny(ppctl::config::Arch arch) {
  ppctl::config::ModelSpec m{/*vocab_size=*/8, /*layers=*/1, /*hidden=*/4, /*heads=*/2, /*seq_len=*/4};
  m.arch = arch;
  m.ffn_hidden = 8;
  m.tie_embeddings = arch == ppctl::config::Arch::Gpt2;
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = ppctl::fuzz::scratch_dir();
  ppctl::fuzz::write_bytes(dir + "/model.safetensors", ppctl::fuzz::text_of(data, size));
  ppctl::fuzz::expect_only_documented_errors([&] {
    const ppctl::interop::SafetensorsFile file(dir + "/model.safetensors");
    for (const auto& [name, info] : file.tensors()) {
      const uint64_t bytes = static_cast<uint64_t>(info.numel()) * ppctl::interop::dtype_size(info.dtype);
      if (info.end < info.begin || info.end - info.begin != bytes || info.end > size) {
        std::abort();  // an entry accepted that does not lie inside the file as its dtype and shape say
      }
      if (info.dtype == "F32" || info.dtype == "F16" || info.dtype == "BF16") {
        if (file.read_f32(name).size() != static_cast<size_t>(info.numel())) std::abort();
      }
    }
  });
  for (const auto arch : {ppctl::config::Arch::Gpt2, ppctl::config::Arch::Qwen2}) {
    ppctl::fuzz::expect_only_documented_errors([&] {
      const ppctl::interop::HfFolder folder(dir);
      const auto model = tiny(arch);
      const auto tensors = ppctl::interop::hf_tensors(model);
      folder.check(tensors);
      for (const auto& t : tensors) {
        int64_t numel = 1;
        for (const int64_t n : t.ppctl_shape) numel *= n;
        if (folder.read(t).size() != static_cast<size_t>(numel)) std::abort();  // not the parameter's size
      }
    });
  }
  return 0;
}
