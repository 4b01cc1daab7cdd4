// The files of a checkpoint: which unit a parameter belongs to and the unit files a model has at a
// tensor-parallel size (whole files at t = 1, one shard file per tp rank plus one replicated file at t > 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppctl::checkpoint {

/// The unit a parameter belongs to: `embedding` (tok_embed, pos_embed), `block<i>` or `head`
/// (ln_f, lm_head). Throws ppctl::InternalError for any other name.
std::string checkpoint_unit(const std::string& parameter_name);

/// The units of a model with `layers` blocks, in file order: embedding, block0 ... block<layers-1>, head.
std::vector<std::string> checkpoint_units(int64_t layers);

/// The file of `unit` that holds tensor-parallel rank `rank`'s shards of the unit's split parameters (and their
/// AdamW state) in a checkpoint written at `tensor_parallel` t: `block3.pt`, the whole unit, at t = 1;
/// `block3.tp1-of-2.pt` at t > 1. 0 <= rank < t.
std::string shard_file(const std::string& unit, int64_t tensor_parallel, int64_t rank);

/// The file of `unit` that holds its replicated parameters (norms, row-parallel biases, positions), written once by
/// tp rank 0: `block3.pt` at t = 1, `block3.replicated.pt` at t > 1.
std::string replicated_file(const std::string& unit, int64_t tensor_parallel);

/// The files a model with `layers` blocks has at `tensor_parallel` t, unit by unit: at t = 1 embedding.pt,
/// block0.pt ... head.pt; at t > 1 each unit's t shard files (shard_file, rank order) then its replicated file.
std::vector<std::string> checkpoint_files(int64_t layers, int64_t tensor_parallel = 1);

}  // namespace ppctl::checkpoint
