// Test helper for tests/interop/hf_parity.py: ppctl's logits of a checkpoint on given tokens.
// Usage: ppctl_logits CHECKPOINT TOKENS.txt OUT.safetensors — builds the whole (unpipelined) model the
// checkpoint's meta.json describes, loads its parameters (checkpoint::load_checkpoint), runs the forward on
// the token ids of TOKENS.txt (one sequence per line, whitespace-separated, equal lengths) and writes
// the fp32 logits [sequences, tokens, vocab] as tensor `logits` of OUT.safetensors.
#include <torch/torch.h>

#include "model/stage.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

#include "checkpoint/checkpoint.hpp"
#include "interop/safetensors.hpp"
#include "train/loop.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ppctl_logits CHECKPOINT TOKENS.txt OUT.safetensors\n";
    return 2;
  }
  try {
    const auto checkpoint = ppctl::checkpoint::resolve_checkpoint(argv[1]);
    const auto meta = ppctl::checkpoint::read_checkpoint_meta(checkpoint);
    std::vector<std::vector<int64_t>> rows;
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::vector<int64_t> row;
      for (int64_t id = 0; words >> id;) row.push_back(id);
      if (!row.empty()) rows.push_back(std::move(row));
    }
    const auto n = static_cast<int64_t>(rows.size()), len = static_cast<int64_t>(rows.at(0).size());
    auto tokens = torch::empty({n, len}, torch::kLong);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < len; ++j) tokens[i][j] = rows.at(static_cast<size_t>(i)).at(static_cast<size_t>(j));

    std::vector<ppctl::model::StageModule> stages{
        ppctl::model::StageModule(meta.model, ppctl::model::whole_model_layout(meta.model), meta.seed)};
    const ppctl::config::OptimizerSpec optimizer_spec;
    auto optimizer = ppctl::optim::make_optimizer(stages, optimizer_spec);
    ppctl::checkpoint::load_checkpoint(checkpoint, meta, stages, *optimizer);
    stages[0]->eval();
    torch::NoGradGuard no_grad;
    const ppctl::model::DropoutContext no_dropout{false};
    const auto logits = stages[0]->forward(tokens, no_dropout).contiguous();
    const std::vector<int64_t> shape(logits.sizes().begin(), logits.sizes().end());
    ppctl::interop::write_safetensors(argv[3], {{"logits", shape, logits.data_ptr<float>()}});
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
