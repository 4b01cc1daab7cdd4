// Loading one pipeline stage's parameters from a Hugging Face folder (model.init_from). Torch stays in
// the .cpp: callers pass the stage module by reference.
#pragma once

#include <cstdint>
#include <filesystem>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"

namespace ppctl::model {
class StageModuleImpl;
}

namespace ppctl::interop {

/// What load_hf_weights read (it also logs it): tensors loaded, bytes read from the safetensors files, and the bytes
/// of those tensors whole (in the files' dtypes; wpe counted at ppctl's rows). At t > 1 bytes_read is about
/// whole_bytes / t plus the replicated tensors.
struct HfLoadStats {
  int64_t tensors = 0;
  uint64_t bytes_read = 0;
  uint64_t whole_bytes = 0;
};

/// Copies into every parameter of `stage` (a model::StageModule holding `layout` of `model`) the
/// Hugging Face tensor hf_tensors maps it to, read from the memory-mapped safetensors of `dir`: only
/// this stage's tensors are touched, never the whole model. Parameters keep their device and dtype. At t > 1
/// each rank reads and converts only its slice of each split tensor (HfFolder::read with model::parameter_split's
/// slice: the values of StageModuleImpl::shard_of of the whole tensor, never the whole tensor's bytes).
/// Throws ppctl::CheckpointError naming the tensor and the file when one is missing or misshapen
/// (HfFolder::check's rules), and ppctl::InternalError when the stage has a parameter the mapping does
/// not know (a bug).
HfLoadStats load_hf_weights(const std::filesystem::path& dir, const config::ModelSpec& model,
                            const plan::StageLayout& layout, model::StageModuleImpl& stage);

}  // namespace ppctl::interop
