// Lower-case YAML spelling of the job-spec enums (the inverse of what config/schema.cpp accepts), and
// the model fields whose 0 means an architecture's rule, resolved.
#include "config/job_spec.hpp"

#include "core/error.hpp"

namespace ppctl::config {

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved1F1B: return "interleaved-1f1b";
    case ScheduleKind::ZBH1: return "zb-h1";
    case ScheduleKind::ZBV: return "zbv";
    case ScheduleKind::ZBAuto: return "zb-auto";
    case ScheduleKind::Custom: return "custom";
  }
  throw InternalError("to_string: unknown ScheduleKind");
}

std::string to_string(Device device) {
  switch (device) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
  }
  throw InternalError("to_string: unknown Device");
}

std::string to_string(Backend backend) {
  switch (backend) {
    case Backend::Auto: return "auto";
    case Backend::Gloo: return "gloo";
    case Backend::Nccl: return "nccl";
  }
  throw InternalError("to_string: unknown Backend");
}

std::string to_string(CpuBinding binding) {
  switch (binding) {
    case CpuBinding::Cores: return "cores";
    case CpuBinding::None: return "none";
  }
  throw InternalError("to_string: unknown CpuBinding");
}

std::string to_string(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::Constant: return "constant";
    case LrSchedule::Cosine: return "cosine";
    case LrSchedule::Linear: return "linear";
  }
  throw InternalError("to_string: unknown LrSchedule");
}

std::string to_string(Overlong rule) {
  switch (rule) {
    case Overlong::Error: return "error";
    case Overlong::Drop: return "drop";
    case Overlong::Truncate: return "truncate";
  }
  throw InternalError("to_string: unknown Overlong");
}

std::string to_string(NonFinitePolicy policy) {
  switch (policy) {
    case NonFinitePolicy::Stop: return "stop";
    case NonFinitePolicy::Skip: return "skip";
  }
  throw InternalError("to_string: unknown NonFinitePolicy");
}

std::string to_string(SignalPolicy policy) {
  switch (policy) {
    case SignalPolicy::Checkpoint: return "checkpoint";
    case SignalPolicy::Stop: return "stop";
  }
  throw InternalError("to_string: unknown SignalPolicy");
}

std::string to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::None: return "none";
    case Recompute::Full: return "full";
    case Recompute::Blocks: return "blocks";
  }
  throw InternalError("to_string: unknown Recompute");
}

std::string to_string(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Bf16Params: return "bf16-params";
  }
  throw InternalError("to_string: unknown Precision");
}

std::string to_string(P2pDtype dtype) {
  switch (dtype) {
    case P2pDtype::Auto: return "auto";
    case P2pDtype::Fp32: return "fp32";
    case P2pDtype::Bf16: return "bf16";
  }
  throw InternalError("to_string: unknown P2pDtype");
}

bool computes_in_bf16(Precision precision) { return precision != Precision::Fp32; }

P2pDtype p2p_dtype_of(const RuntimeSpec& runtime) {
  if (runtime.p2p_dtype != P2pDtype::Auto) return runtime.p2p_dtype;
  return computes_in_bf16(runtime.precision) ? P2pDtype::Bf16 : P2pDtype::Fp32;
}

int64_t p2p_element_bytes(const RuntimeSpec& runtime) { return p2p_dtype_of(runtime) == P2pDtype::Bf16 ? 2 : 4; }

std::string to_string(DataFormat format) {
  switch (format) {
    case DataFormat::Text: return "text";
    case DataFormat::Tokens: return "tokens";
    case DataFormat::Megatron: return "megatron";
  }
  throw InternalError("to_string: unknown DataFormat");
}

std::string to_string(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::Uint16: return "uint16";
    case TokenDType::Uint32: return "uint32";
    case TokenDType::Int32: return "int32";
  }
  throw InternalError("to_string: unknown TokenDType");
}

std::string to_string(Arch arch) {
  switch (arch) {
    case Arch::Gpt2: return "gpt2";
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Mistral: return "mistral";
  }
  throw InternalError("to_string: unknown Arch");
}

std::string to_string(Activation activation) {
  switch (activation) {
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_tanh";
  }
  throw InternalError("to_string: unknown Activation");
}

std::string to_string(RopeType type) {
  switch (type) {
    case RopeType::Default: return "default";
    case RopeType::Linear: return "linear";
    case RopeType::Llama3: return "llama3";
    case RopeType::Yarn: return "yarn";
  }
  throw InternalError("to_string: unknown RopeType");
}

int64_t ffn_hidden_of(const ModelSpec& model) {
  if (model.ffn_hidden > 0) return model.ffn_hidden;
  if (model.arch == Arch::Gpt2) return 4 * model.hidden;
  constexpr int64_t kMultipleOf = 256;  // llama/model.py ModelArgs.multiple_of
  const int64_t two_thirds = 2 * (4 * model.hidden) / 3;
  return (two_thirds + kMultipleOf - 1) / kMultipleOf * kMultipleOf;
}

int64_t kv_heads_of(const ModelSpec& model) { return model.kv_heads > 0 ? model.kv_heads : model.heads; }

int64_t head_dim_of(const ModelSpec& model) { return model.head_dim > 0 ? model.head_dim : model.hidden / model.heads; }

bool llama_family(Arch arch) { return arch != Arch::Gpt2; }

int64_t held_out_sequences(int64_t num_sequences, double fraction) {
  if (fraction <= 0.0) return 0;
  const auto held_out = static_cast<int64_t>(static_cast<double>(num_sequences) * fraction);
  return held_out < 1 ? 1 : held_out;
}

}  // namespace ppctl::config
