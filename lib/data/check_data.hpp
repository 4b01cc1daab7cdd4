// Launcher-side validation of the training data before any worker starts: files, index, sizes and
// every token id against model.vocab_size (scanned once, the result cached beside the data).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/job_spec.hpp"
#include "data/token_source.hpp"

namespace ppctl::data {

/// The ids of a token file as a scan (or a tokenizer sidecar) found them.
struct IdRange {
  int64_t min_id = 0;
  int64_t max_id = 0;
  int64_t tokens = 0;
};

/// Checks every source of spec.data.sources: each opens (files present, readable, sizes a whole
/// number of ids; megatron: magic, version, a known integer dtype, the index consistent with the
/// .bin, MegatronSource::check_index), holds at least one training window after data.eval_fraction's
/// held-out split, and — for token formats — model.vocab_size is at least the vocabulary of the
/// PREFIX.tokenizer.json sidecar `ppctl data prepare` writes, and every id lies in [0, vocab_size).
/// The ids come from the sidecar's max_token_id when present, else from one scan of the file whose
/// result is cached in FILE.ppctl-ids.json (keyed by the file's size and mtime; skipped when the
/// folder is not writable). Throws ppctl::ConfigError with one line per problem, each naming the spec,
/// the field (data.path, data.blend[i].path, model.vocab_size), the file and, for a bad id, the position
/// of the first one (token index, and the sequence for megatron); exit code 2 in app/. With `spec_text`
/// (the spec's YAML), each line starts with the field's `SPEC:LINE` (config::field_location).
void check_data(const config::JobSpec& spec, const std::string& spec_text = {});

/// The id range of `source`'s token file at `path` (a .bin or tokens file), from the cache beside it
/// when that matches the file's size and mtime, else by scanning and writing the cache.
IdRange scan_ids(const TokenSource& source, const std::string& path);

/// The first token position in `source` whose id lies outside [0, vocab_size), or nullopt.
std::optional<int64_t> first_id_outside(const TokenSource& source, int64_t vocab_size);

}  // namespace ppctl::data
