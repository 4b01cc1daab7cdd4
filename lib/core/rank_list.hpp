// Compressed text of a set of ranks (`0-15`, `0-1008:16`) for plans and messages. Pure; no torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppctl::core {

/// The ranks as comma-separated items (", " between them), in ascending order, duplicates dropped:
/// three or more ranks with a constant step of 1 become `A-B` (A, A+1, ..., B), with a constant step
/// S > 1 `A-B:S` (A, A+S, ..., B); other ranks are written alone. Runs are taken greedily from the
/// smallest rank (each as long as its first step allows). Empty input gives "" (e.g.
/// {0,1,2,3} -> "0-3"; {0,16,32,48} -> "0-48:16"; {1,3} -> "1, 3"; {0,1,2,7} -> "0-2, 7").
std::string format_rank_list(std::vector<int64_t> ranks);

}  // namespace ppctl::core
