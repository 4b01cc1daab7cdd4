// The name and layout mapping between Hugging Face tensors (GPT2LMHeadModel, LlamaForCausalLM) and
// ppctl's parameters (model::StageModule::named_parameters; docs/fine-tuning.md lists them).
// Torch-free: the launcher checks a folder's tensors against the spec before anything spawns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"

namespace ppctl::interop {

/// How an HF tensor becomes a ppctl parameter.
enum class Layout {
  Same,       ///< the same shape and element order
  Transpose,  ///< GPT-2's Conv1D weights are [in, out]; torch Linear (ppctl) is [out, in]
  Rows,       ///< GPT-2's wpe [n_positions, h]: ppctl takes its first seq_len rows
};

/// One ppctl parameter and the Hugging Face tensor it comes from / goes to.
struct HfTensor {
  std::string ppctl_name;                ///< `block3.qkv.weight`
  std::vector<int64_t> ppctl_shape;      ///< as torch holds it
  std::vector<std::string> hf_names;     ///< accepted HF names, canonical first: with and without the
                                         ///< `transformer.` / `model.` prefix; for the last stage's copy
                                         ///< of a tied embedding lm_head.weight, then the embedding's
  std::vector<int64_t> hf_shape;         ///< the HF tensor's shape (Rows: at least this many rows)
  Layout layout = Layout::Same;
  bool tied_copy = false;                ///< the last stage's lm_head.weight copying the tied embedding
                                         ///< (HF saves no lm_head.weight then; export skips it)
};

/// The tensors of the stage `layout` of `model` (gpt2 or the llama family), in ppctl's registration order:
/// embedding, blocks, final norm, head. A lone stage with tied embeddings has no lm_head entry.
std::vector<HfTensor> hf_tensors(const config::ModelSpec& model, const plan::StageLayout& layout);

/// The tensors of the whole unpipelined model (what a Hugging Face folder of it holds, plus nothing
/// else): hf_tensors over model::whole_model_layout.
std::vector<HfTensor> hf_tensors(const config::ModelSpec& model);

/// `[768, 2304]`, for messages.
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace ppctl::interop
