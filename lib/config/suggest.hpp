// "Did you mean ...?" for misspelt YAML keys and enum values: edit distance and the closest candidate.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ppctl::config {

/// Optimal-string-alignment distance between `a` and `b`, ignoring ASCII case: the number of
/// single-character insertions, deletions, substitutions and adjacent transpositions turning one into the other.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate closest to `word`, if it is close enough to be a plausible typo: within
/// max(1, length / 4) edits (length of the longer string), or `word` is a prefix of it (at least 3 characters,
/// e.g. `vocab` for `vocab_size`). Ties go to the earlier candidate. Empty when nothing is close.
std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& candidates);

/// A fix hint for an unrecognised `word`: "did you mean 'X'?" when closest_match finds one,
/// else "use one of A, B, C" listing every candidate.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

/// Candidates joined as "A, B, C" (used to list valid keys and enum values).
std::string join_names(const std::vector<std::string>& names);

}  // namespace ppctl::config
