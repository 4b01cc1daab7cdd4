// The table of other tools' argument names and the ppctl keys that take their meaning (see foreign_keys.hpp).
#include "config/foreign_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ppctl::config {

const std::vector<ForeignKey>& foreign_keys() {
  static const std::vector<ForeignKey> table{
      // Megatron-LM (megatron/training/arguments.py)
      {"num_layers", "Megatron-LM", "model.layers", ""},
      {"hidden_size", "Megatron-LM", "model.hidden", ""},
      {"num_attention_heads", "Megatron-LM", "model.heads", ""},
      {"num_query_groups", "Megatron-LM", "model.kv_heads", ""},
      {"ffn_hidden_size", "Megatron-LM", "model.ffn_hidden", ""},
      {"seq_length", "Megatron-LM", "model.seq_len", ""},
      {"max_position_embeddings", "Megatron-LM", "model.seq_len", "ppctl's positions are the sequence length"},
      {"untie_embeddings_and_output_weights", "Megatron-LM", "model.tie_embeddings", "write tie_embeddings: false"},
      {"hidden_dropout", "Megatron-LM", "model.dropout", "one rate for every dropout"},
      {"attention_dropout", "Megatron-LM", "model.dropout", "one rate for every dropout"},
      {"norm_epsilon", "Megatron-LM", "model.norm_eps", ""},
      {"rotary_base", "Megatron-LM", "model.rope_theta", ""},
      {"swiglu", "Megatron-LM", "model.arch", "write arch: llama (SwiGLU, RMSNorm, RoPE)"},
      {"pipeline_model_parallel_size", "Megatron-LM", "pipeline.stages", ""},
      {"virtual_pipeline_model_parallel_size", "Megatron-LM", "pipeline.virtual_stages", ""},
      {"num_layers_per_virtual_pipeline_stage", "Megatron-LM", "pipeline.virtual_stages",
       "ppctl takes the number of virtual stages per rank, not the layers in each"},
      {"global_batch_size", "Megatron-LM", "pipeline.microbatches",
       "ppctl's global batch is micro_batch_size x microbatches x data_parallel sequences"},
      {"num_microbatches", "Megatron-LM", "pipeline.microbatches", ""},
      {"data_parallel_size", "Megatron-LM", "pipeline.data_parallel", ""},
      {"tensor_model_parallel_size", "Megatron-LM", "pipeline.tensor_parallel", ""},
      {"context_parallel_size", "Megatron-LM", "", "ppctl has no context parallelism: remove it"},
      {"expert_model_parallel_size", "Megatron-LM", "", "ppctl has no mixture-of-experts layers: remove it"},
      {"train_iters", "Megatron-LM", "train.steps", ""},
      {"lr_warmup_iters", "Megatron-LM", "optimizer.warmup_steps", ""},
      {"lr_decay_style", "Megatron-LM", "optimizer.lr_schedule", ""},
      {"lr_decay_iters", "Megatron-LM", "train.steps", "ppctl's schedule decays over train.steps"},
      {"clip_grad", "Megatron-LM", "optimizer.clip_grad_norm", ""},
      {"adam_beta1", "Megatron-LM", "optimizer.betas", "write betas: [beta1, beta2]"},
      {"adam_beta2", "Megatron-LM", "optimizer.betas", "write betas: [beta1, beta2]"},
      {"adam_eps", "Megatron-LM", "optimizer.eps", ""},
      {"use_distributed_optimizer", "Megatron-LM", "optimizer.distributed", ""},
      {"recompute_granularity", "Megatron-LM", "train.recompute", "full or blocks"},
      {"recompute_method", "Megatron-LM", "train.recompute", "full or blocks"},
      {"recompute_num_layers", "Megatron-LM", "train.recompute_every", ""},
      {"bf16", "Megatron-LM", "runtime.precision",
       "write precision: bf16-params (bf16 weights, fp32 main parameters, as Megatron's --bf16; precision: bf16 is "
       "autocast over fp32 weights)"},
      {"fp16", "Megatron-LM", "runtime.precision", "ppctl has bf16 and fp32, no fp16"},
      {"save", "Megatron-LM", "checkpoint.dir", ""},
      {"save_interval", "Megatron-LM", "checkpoint.interval", ""},
      {"load", "Megatron-LM", "model.init_from",
       "a Hugging Face folder to start from; a ppctl checkpoint is resumed with `ppctl train --resume`"},
      {"data_path", "Megatron-LM", "data.path", ""},
      {"train_data_path", "Megatron-LM", "data.path", ""},
      {"split", "Megatron-LM", "data.eval_fraction", "the share held out for evaluation"},
      {"eval_interval", "Megatron-LM", "eval.interval", ""},
      {"eval_iters", "Megatron-LM", "eval.batches", ""},
      {"tensorboard_dir", "Megatron-LM", "observe.tensorboard", "event files go to the run directory"},
      {"distributed_backend", "Megatron-LM", "runtime.backend", ""},
      {"distributed_timeout_minutes", "Megatron-LM", "runtime.comm_timeout_s", "in seconds"},
      {"tokenizer_type", "Megatron-LM", "", "tokenize with `ppctl data prepare --tokenizer` and train on its output"},
      // torchtitan's model arguments (torchtitan/models/llama3/model/args.py, TransformerModelArgs)
      {"n_layers", "torchtitan", "model.layers", ""},
      {"dim", "torchtitan", "model.hidden", ""},
      {"n_heads", "torchtitan", "model.heads", ""},
      {"n_kv_heads", "torchtitan", "model.kv_heads", ""},
      {"max_seq_len", "torchtitan", "model.seq_len", ""},
      {"multiple_of", "torchtitan", "model.ffn_hidden", "ppctl takes the MLP's hidden size itself"},
      {"ffn_dim_multiplier", "torchtitan", "model.ffn_hidden", "ppctl takes the MLP's hidden size itself"},
      // torchtitan (torchtitan/config/job_config.py)
      {"pipeline_parallel_degree", "torchtitan", "pipeline.stages", ""},
      {"pipeline_parallel_schedule", "torchtitan", "pipeline.schedule", ""},
      {"pipeline_parallel_microbatch_size", "torchtitan", "pipeline.micro_batch_size", ""},
      {"data_parallel_replicate_degree", "torchtitan", "pipeline.data_parallel", ""},
      {"data_parallel_shard_degree", "torchtitan", "optimizer.distributed",
       "ppctl shards AdamW's state (not the weights) over pipeline.data_parallel"},
      {"tensor_parallel_degree", "torchtitan", "pipeline.tensor_parallel", ""},
      {"context_parallel_degree", "torchtitan", "", "ppctl has no context parallelism: remove it"},
      {"local_batch_size", "torchtitan", "pipeline.microbatches",
       "per replica, ppctl runs micro_batch_size x microbatches sequences"},
      {"max_norm", "torchtitan", "optimizer.clip_grad_norm", ""},
      {"mixed_precision_param", "torchtitan", "runtime.precision", "write precision: bf16"},
      {"decay_type", "torchtitan", "optimizer.lr_schedule", ""},
      {"min_lr_factor", "torchtitan", "optimizer.min_lr", "ppctl takes the floor itself: lr x factor"},
      {"dump_folder", "torchtitan", "observe.runs_dir", ""},
      {"enable_checkpoint", "torchtitan", "checkpoint.dir", "checkpoints are on when a folder is given"},
      // Hugging Face's Trainer, DeepSpeed and nanoGPT (GPT-2's config.json names too).
      {"learning_rate", "Hugging Face Trainer", "optimizer.lr", ""},
      {"max_steps", "Hugging Face Trainer", "train.steps", ""},
      {"gradient_accumulation_steps", "Hugging Face Trainer", "pipeline.microbatches",
       "each microbatch is one accumulated micro batch"},
      {"train_micro_batch_size_per_gpu", "DeepSpeed", "pipeline.micro_batch_size", ""},
      {"train_batch_size", "DeepSpeed", "pipeline.microbatches",
       "the global batch is micro_batch_size x microbatches x data_parallel sequences"},
      {"pipeline_parallel_size", "DeepSpeed", "pipeline.stages", ""},
      {"n_layer", "nanoGPT", "model.layers", ""},
      {"n_embd", "nanoGPT", "model.hidden", ""},
      {"n_head", "nanoGPT", "model.heads", ""},
      {"block_size", "nanoGPT", "model.seq_len", ""},
  };
  return table;
}

std::optional<std::string> foreign_key_hint(const std::string& name) {
  std::string key = name;
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char ch) {
    return ch == '-' ? '_' : static_cast<char>(std::tolower(ch));
  });
  for (const auto& entry : foreign_keys()) {
    if (entry.name != key) continue;
    if (entry.target.empty()) return fmt::format("{}'s {}: {}", entry.tool, entry.name, entry.note);
    return entry.note.empty() ? fmt::format("{}'s {} is {}", entry.tool, entry.name, entry.target)
                              : fmt::format("{}'s {} is {}: {}", entry.tool, entry.name, entry.target, entry.note);
  }
  return std::nullopt;
}

}  // namespace ppctl::config
