// Compressed lists: expands Slurm host lists (`node[01-03,07],gpu5`) into host names, and writes rank
// lists compressed (`ranks 1-3, 7`). No torch.
#pragma once

#include <string>
#include <vector>

namespace ppctl::comm {

/// Expands a Slurm host list as in SLURM_JOB_NODELIST, in order: comma-separated entries, each a
/// host name with zero or more bracket groups of comma-separated numbers and ranges (`lo-hi`,
/// inclusive); a group's numbers keep the width of `lo` (zero padding: `n[08-10]` -> n08, n09, n10);
/// several groups in one entry give every combination, the last group varying fastest
/// (`r[1-2]n[1-2]` -> r1n1, r1n2, r2n1, r2n2), as `scontrol show hostnames` does.
/// Throws ppctl::CommError naming `variable` and the text for an empty list or entry, unbalanced or
/// nested brackets, a non-numeric bound, or a range whose end is below its start.
std::vector<std::string> expand_hostlist(const std::string& text,
                                         const std::string& variable = "SLURM_JOB_NODELIST");

/// `ranks` (any order, duplicates allowed) for messages, compressed by core::format_rank_list:
/// "rank 3", "ranks 1-7", "ranks 0, 2-4, 9", "ranks 1-7:2"; "no rank" when empty.
std::string rank_list(const std::vector<int>& ranks);

}  // namespace ppctl::comm
