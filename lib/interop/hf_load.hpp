// Loading one pipeline stage's parameters from a Hugging Face folder (model.init_from). Torch stays in
// the .cpp: callers pass the stage module by reference.
#pragma once

#include <filesystem>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"

namespace ppctl::model {
class StageModuleImpl;
}

namespace ppctl::interop {

/// Copies into every parameter of `stage` (a model::StageModule holding `layout` of `model`) the
/// Hugging Face tensor hf_tensors maps it to, read from the memory-mapped safetensors of `dir`: only
/// this stage's tensors are touched, never the whole model. Parameters keep their device and dtype. At t > 1
/// each parameter takes its tensor-parallel shard of the whole tensor (StageModuleImpl::shard_of).
/// Throws ppctl::CheckpointError naming the tensor and the file when one is missing or misshapen
/// (HfFolder::check's rules), and ppctl::InternalError when the stage has a parameter the mapping does
/// not know (a bug).
void load_hf_weights(const std::filesystem::path& dir, const config::ModelSpec& model,
                     const plan::StageLayout& layout, model::StageModuleImpl& stage);

}  // namespace ppctl::interop
