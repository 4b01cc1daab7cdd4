// Names people already type: Megatron-LM arguments and torchtitan config keys that a job spec spells
// otherwise, each mapped to the ppctl key (or to why ppctl has none), for the "unknown key" fix.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ppctl::config {

/// One argument of another tool and where its meaning lives in a ppctl job spec.
struct ForeignKey {
  std::string name;    ///< as the other tool spells it, underscores (Megatron-LM's --num-layers is num_layers)
  std::string tool;    ///< "Megatron-LM", "torchtitan", "Hugging Face Trainer", "DeepSpeed" or "nanoGPT"
  std::string target;  ///< the ppctl key as section.key, e.g. "model.layers"; "" when ppctl has no counterpart
  std::string note;    ///< how the meaning differs or what to do instead; may be ""
};

/// Every entry (Megatron-LM: megatron/training/arguments.py; torchtitan: torchtitan/config/job_config.py).
const std::vector<ForeignKey>& foreign_keys();

/// The fix for an unknown key `name` that another tool uses (hyphens read as underscores, any case):
/// "Megatron-LM's num_layers is model.layers", with the entry's note after a colon; empty for any
/// other name.
std::optional<std::string> foreign_key_hint(const std::string& name);

}  // namespace ppctl::config
