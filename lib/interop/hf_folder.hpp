// A Hugging Face model folder's weights: model.safetensors, or the shards model.safetensors.index.json
// names, memory-mapped; finding, checking and reading ppctl's tensors from them. Torch-free.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interop/hf_names.hpp"
#include "interop/safetensors.hpp"

namespace ppctl::interop {

/// The safetensors files of one folder. Opening maps every file and validates its header; no tensor
/// data are read until read() asks for them, so each rank touches only the pages of its own tensors.
class HfFolder {
 public:
  /// Opens DIR/model.safetensors.index.json's shards when the index exists, else DIR/model.safetensors.
  /// Throws ppctl::CheckpointError naming the file when: neither exists, the index is not JSON with a
  /// `weight_map` of tensor name -> file name, it names a shard that is missing (naming the shard and
  /// a tensor mapped to it), a tensor the index maps to a shard is not in it, or a file is not valid
  /// safetensors (SafetensorsFile's rules, truncation included).
  explicit HfFolder(const std::filesystem::path& dir);

  /// Where one tensor lives.
  struct Found {
    const SafetensorsFile* file = nullptr;
    const TensorInfo* info = nullptr;
  };

  /// The first of `names` the folder holds; file null when none.
  Found find(const std::vector<std::string>& names) const;

  /// Checks every tensor of `tensors` is present with its HF shape (Layout::Rows: at least as many
  /// rows) and a dtype read_f32 converts (F32, F16, BF16). Throws ppctl::CheckpointError listing every
  /// problem, each naming the tensor and the file: `missing tensor transformer.h.1.ln_1.weight
  /// (ppctl block1.ln1.weight) in DIR/model.safetensors`, `tensor ... in FILE has shape [a, b], the
  /// spec needs [c, d]`.
  void check(const std::vector<HfTensor>& tensors) const;

  /// Tensor `t` as ppctl holds it: fp32, ppctl_shape, row-major (Conv1D weights transposed, wpe cut to
  /// its first rows). Throws ppctl::CheckpointError as check() does when it is missing or misshapen.
  std::vector<float> read(const HfTensor& t) const { return read(t, TensorSlice{}).values; }

  /// Which part of a ppctl parameter a tensor-parallel rank holds: model::Split's `dim` (-1: all of it) and `parts`,
  /// and the rank `rank` of `size` (model::take_shard's rule, plan::shard_pieces).
  struct TensorSlice {
    int64_t dim = -1;
    int64_t parts = 1;
    int64_t size = 1;
    int64_t rank = 0;
  };
  /// Values and the bytes of the file they were read from.
  struct SliceRead {
    std::vector<float> values;
    uint64_t bytes_read = 0;
  };

  /// Slice `slice` of tensor `t` as ppctl holds it (read()'s layout; take_shard's shape of ppctl_shape, row-major),
  /// reading from the mapping only the slice's bytes and converting only its elements: a ppctl dim-0 slice is one
  /// contiguous run of rows per fused part in the file, a dim-1 slice one run per row; GPT-2's Conv1D weights,
  /// stored transposed, swap the two (a ppctl row slice is a column run per file row) and are transposed in place;
  /// wpe's rows beyond ppctl's are not read. bytes_read counts what was read (about 1/size of a split tensor's
  /// bytes). Dims other than 0 and 1 are not split by ppctl. Throws ppctl::CheckpointError as read() does.
  SliceRead read(const HfTensor& t, const TensorSlice& slice) const;

  /// The files, for messages: `DIR/model.safetensors` or `DIR/model.safetensors.index.json (N shards)`.
  const std::string& description() const { return description_; }

 private:
  std::filesystem::path dir_;
  std::string description_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> by_name_;  ///< tensor name -> its file
};

/// Launcher side: checks every tensor the spec's whole model needs (hf_tensors(model)) against the
/// headers of `dir`; no tensor data are read. Throws ppctl::CheckpointError as HfFolder and check do.
void check_hf_folder(const std::filesystem::path& dir, const config::ModelSpec& model);

}  // namespace ppctl::interop
