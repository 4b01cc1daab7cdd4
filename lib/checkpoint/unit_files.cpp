// Checkpoint unit names and the file names of each unit at a tensor-parallel size.
#include "checkpoint/unit_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/check.hpp"

namespace ppctl::checkpoint {

std::string checkpoint_unit(const std::string& parameter_name) {
  const auto prefix = parameter_name.substr(0, parameter_name.find('.'));
  if (prefix == "tok_embed" || prefix == "pos_embed") return "embedding";
  if (prefix == "ln_f" || prefix == "lm_head") return "head";
  PPCTL_ASSERT(prefix.rfind("block", 0) == 0 && prefix.size() > 5 &&
                   std::all_of(prefix.begin() + 5, prefix.end(), ::isdigit),
               fmt::format("parameter {} belongs to no checkpoint unit", parameter_name));
  return prefix;
}

std::vector<std::string> checkpoint_units(int64_t layers) {
  std::vector<std::string> units{"embedding"};
  for (int64_t i = 0; i < layers; ++i) units.push_back(fmt::format("block{}", i));
  units.emplace_back("head");
  return units;
}

std::string shard_file(const std::string& unit, int64_t tensor_parallel, int64_t rank) {
  PPCTL_ASSERT(tensor_parallel >= 1 && rank >= 0 && rank < tensor_parallel,
               fmt::format("shard file of rank {} of {}", rank, tensor_parallel));
  return tensor_parallel == 1 ? unit + ".pt" : fmt::format("{}.tp{}-of-{}.pt", unit, rank, tensor_parallel);
}

std::string replicated_file(const std::string& unit, int64_t tensor_parallel) {
  return tensor_parallel == 1 ? unit + ".pt" : unit + ".replicated.pt";
}

std::vector<std::string> checkpoint_files(int64_t layers, int64_t tensor_parallel) {
  std::vector<std::string> files;
  for (const auto& unit : checkpoint_units(layers)) {
    for (int64_t rank = 0; rank < tensor_parallel; ++rank) files.push_back(shard_file(unit, tensor_parallel, rank));
    if (tensor_parallel > 1) files.push_back(replicated_file(unit, tensor_parallel));
  }
  return files;
}

}  // namespace ppctl::checkpoint
