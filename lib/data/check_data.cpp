// check_data: the data checks run once by the launcher, and the cached id scan.
#include "data/check_data.hpp"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "data/packed_corpus.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/dataset.hpp"
#include "data/megatron_source.hpp"

namespace ppctl::data {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int64_t kChunk = int64_t{1} << 20;  // ids converted per pass of a scan
constexpr int64_t kMaxVocabSize = 1'000'000;  // model.vocab_size's upper bound (config/job_spec.hpp)

/// Visits the ids of `source` chunk by chunk: `visit(first position, ids, count)`; stops when it
/// returns false.
template <typename Visit>
void for_each_chunk(const TokenSource& source, const Visit& visit) {
  std::vector<int64_t> ids(static_cast<size_t>(std::min(kChunk, std::max<int64_t>(source.num_tokens(), 1))));
  for (int64_t start = 0; start < source.num_tokens(); start += kChunk) {
    const int64_t n = std::min(kChunk, source.num_tokens() - start);
    source.read(start, n, ids.data());
    if (!visit(start, ids.data(), n)) return;
  }
}

struct FileKey {
  int64_t size = -1;
  int64_t mtime_ns = -1;
};

FileKey key_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return {};
  return {static_cast<int64_t>(info.st_size),
          static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

std::optional<json> read_json(const std::string& path) {
  std::error_code ignored;
  if (!fs::exists(path, ignored)) return std::nullopt;
  try {
    return json::parse(core::read_file(path));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// Why the existing file `path` cannot be opened for reading (strerror), or nothing when it can or does not
/// exist: a file the spec names (here the tokenizer sidecar) must not be skipped silently for want of
/// permission.
std::optional<std::string> unreadable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return std::nullopt;
  }
  if (errno == ENOENT) return std::nullopt;
  return std::string(std::strerror(errno));
}

/// The data file of a source and the prefix its tokenizer sidecar hangs off.
std::string data_file(const config::DataSource& s) {
  return s.format == config::DataFormat::Megatron ? s.files.at(0) + ".bin" : s.files.at(0);
}

/// `j`'s integer `name`; nullopt when absent or not an integer (a fraction or 1e30 does not convert).
std::optional<int64_t> integer_field(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

/// The id range an id-scan cache `j` records, when it is one (an object of the expected fields and types,
/// min <= max) for this file and `source`; nullopt otherwise (stale, damaged or hand-edited: scan again).
/// Keyed by the file's size and mtime and by how it is read (format and dtype): the same bytes read as
/// uint32 instead of uint16 hold other ids.
std::optional<IdRange> cached_range(const json& j, const FileKey& key, const TokenSource& source) {
  if (!j.is_object()) return std::nullopt;
  const auto text = [&](const char* name) {
    const auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto min_id = integer_field(j, "min_token_id");
  const auto max_id = integer_field(j, "max_token_id");
  if (text("format") != "ppctl-id-scan" || integer_field(j, "version") != 2 || integer_field(j, "size") != key.size ||
      integer_field(j, "mtime_ns") != key.mtime_ns || text("source") != source.describe() ||
      integer_field(j, "tokens") != source.num_tokens() || !min_id || !max_id || *min_id > *max_id) {
    return std::nullopt;
  }
  return IdRange{*min_id, *max_id, source.num_tokens()};
}

}  // namespace

IdRange scan_ids(const TokenSource& source, const std::string& path) {
  const std::string cache = path + ".ppctl-ids.json";
  const FileKey key = key_of(path);
  if (const auto j = read_json(cache)) {
    if (const auto range = cached_range(*j, key, source)) return *range;
  }
  IdRange range{0, 0, source.num_tokens()};
  bool first = true;
  for_each_chunk(source, [&](int64_t, const int64_t* ids, int64_t n) {
    const auto [lo, hi] = std::minmax_element(ids, ids + n);
    range.min_id = first ? *lo : std::min(range.min_id, *lo);
    range.max_id = first ? *hi : std::max(range.max_id, *hi);
    first = false;
    return true;
  });
  const json out{{"format", "ppctl-id-scan"}, {"version", 2}, {"source", source.describe()}, {"size", key.size},
                 {"mtime_ns", key.mtime_ns},  {"tokens", range.tokens}, {"min_token_id", range.min_id},
                 {"max_token_id", range.max_id}};
  try {
    core::write_file_atomically(cache, out.dump(2) + "\n");
  } catch (const Error&) {
    // A read-only data folder: the scan is repeated next time, nothing else changes.
  }
  return range;
}

std::optional<int64_t> first_id_outside(const TokenSource& source, int64_t vocab_size) {
  std::optional<int64_t> found;
  for_each_chunk(source, [&](int64_t start, const int64_t* ids, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
      if (ids[k] < 0 || ids[k] >= vocab_size) {
        found = start + k;
        return false;
      }
    }
    return true;
  });
  return found;
}

namespace {

/// A megatron source that is half a chat dataset: one of PREFIX.loss_mask.bin / .idx without the other, or a
/// sidecar written by a chat preparation without masks beside it. Training it would silently take every token as
/// a target, without conversation boundaries.
std::optional<std::string> half_chat_dataset(const config::DataSource& s) {
  if (s.format != config::DataFormat::Megatron || s.files.empty()) return std::nullopt;
  const std::string masks = loss_mask_prefix(s.files[0]);
  const bool bin = fs::exists(masks + ".bin"), idx = fs::exists(masks + ".idx");
  const auto sidecar = read_json(s.files[0] + ".tokenizer.json");
  const bool chat_sidecar = sidecar && sidecar->is_object() && sidecar->contains("chat");
  if (bin == idx && (idx || !chat_sidecar)) return std::nullopt;
  const std::string missing = !bin && !idx ? masks + ".bin and " + masks + ".idx" : masks + (bin ? ".idx" : ".bin");
  return fmt::format("{} {} missing: {} is a chat dataset{} whose loss masks are incomplete, and without them every "
                     "token would be a target and conversations would see each other (fix: prepare it again with "
                     "`ppctl data prepare --input-format chat`; or remove {}.* and the \"chat\" entry of {}.tokenizer.json "
                     "to train on it as plain data)",
                     missing, !bin && !idx ? "are" : "is", s.files[0], chat_sidecar ? " (its sidecar says so)" : "",
                     masks, s.files[0]);
}

}  // namespace

void check_data(const config::JobSpec& spec, const std::string& spec_text) {
  const auto location = [&](const std::string& field) {
    return spec_text.empty() ? spec.source : config::field_location(spec_text, spec.source, field);
  };
  std::vector<std::string> problems;
  const auto& sources = spec.data.sources;
  const int64_t vocab = spec.model.vocab_size;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& s = sources[i];
    const std::string field = spec.data.paths.empty() ? fmt::format("data.blend[{}].path", i) : "data.path";
    const auto problem = [&](const std::string& what) {
      problems.push_back(fmt::format("{}: {}: {}", location(field), field, what));
    };
    std::unique_ptr<TokenSource> source;
    try {
      source = open_token_source(s);
      if (const auto* megatron = dynamic_cast<const MegatronSource*>(source.get())) megatron->check_index();
    } catch (const Error& e) {
      problem(e.what());
      continue;
    }
    if (const auto half = half_chat_dataset(s)) {
      problem(*half);
      continue;
    }
    const bool chat = s.format == config::DataFormat::Megatron && has_loss_masks(s.files.at(0));
    if (chat) {  // the loss masks beside it: their index, their lengths, the overlong rule, targets to train on
      try {
        MegatronSource(loss_mask_prefix(s.files.at(0))).check_index();
        const PackedCorpus corpus(s.files.at(0), spec.model.seq_len, spec.data.eval_fraction, spec.data.overlong);
        const auto no_targets = [&](const char* which, int64_t windows) {
          return fmt::format("{}: its {} {} window(s) hold no target token (every loss mask 0 there): the loss would be "
                             "0 and teach nothing (fix: prepare it again with --train-on assistant on conversations "
                             "with assistant turns, or --train-on all{})",
                             corpus.describe(), windows, which,
                             spec.model.seq_len < 64 ? "; or raise model.seq_len: truncation may have cut every answer"
                                                     : "");
        };
        if (corpus.train_targets() == 0) problem(no_targets("training", corpus.train_windows()));
        if (spec.eval.interval > 0 && corpus.eval_windows() > 0 && corpus.eval_targets() == 0) {
          problem(no_targets("held-out", corpus.eval_windows()));
        }
      } catch (const Error& e) {
        problem(e.what());
        continue;
      }
    }
    const int64_t windows = windows_in(source->num_tokens(), spec.model.seq_len);
    const int64_t held_out = windows == 0 ? 0 : config::held_out_sequences(windows, spec.data.eval_fraction);
    if (!chat && windows - held_out < 1) {
      problem(fmt::format("{} holds {} tokens: {} window(s) of model.seq_len + 1 = {} tokens, {} held out by "
                          "data.eval_fraction {:g}, leaving none to train on (fix: add data, lower model.seq_len, "
                          "or lower data.eval_fraction)",
                          source->describe(), source->num_tokens(), windows, spec.model.seq_len + 1, held_out,
                          spec.data.eval_fraction));
    }
    if (s.format == config::DataFormat::Text) continue;  // bytes: ids < 256 <= vocab_size (config checks it)
    const std::string file = data_file(s);
    std::optional<int64_t> max_id;
    const std::string sidecar_path = s.files.at(0) + ".tokenizer.json";
    if (const auto why = unreadable(sidecar_path)) {
      problem(fmt::format("{}: cannot be read: {} (the tokenizer sidecar of {}, checked against model.vocab_size; "
                          "fix: check its permissions)",
                          sidecar_path, *why, file));
      continue;
    }
    if (const auto sidecar = read_json(sidecar_path);
        sidecar && sidecar->value("format", "") == "ppctl-tokenizer") {
      const auto tokenizer_vocab = sidecar->value("vocab_size", int64_t{0});
      if (tokenizer_vocab > vocab) {
        problems.push_back(fmt::format(
            "{}: model.vocab_size: {} is smaller than the vocabulary of the tokenizer that wrote {} ({} ids, "
            "from {}) (fix: {})",
            spec.source, vocab, file, tokenizer_vocab, sidecar_path,
            tokenizer_vocab <= kMaxVocabSize
                ? fmt::format("set model.vocab_size: {} or more", tokenizer_vocab)
                : fmt::format("re-tokenize with a vocabulary of at most {} ids, model.vocab_size's upper bound",
                              kMaxVocabSize)));
      }
      // Its max_token_id is trusted only for the data it was written with: the same token count, and a
      // sidecar no older than the data file (a .bin replaced under an old sidecar is scanned instead).
      const FileKey data_key = key_of(file), sidecar_key = key_of(sidecar_path);
      if (sidecar->contains("max_token_id") && sidecar->at("max_token_id").is_number_integer() &&
          sidecar->value("tokens", int64_t{-1}) == source->num_tokens() && sidecar_key.mtime_ns >= data_key.mtime_ns) {
        max_id = sidecar->at("max_token_id").get<int64_t>();
      }
    }
    int64_t min_id = 0;
    if (!max_id) {
      const IdRange range = scan_ids(*source, file);
      max_id = range.max_id;
      min_id = range.min_id;
    }
    if (*max_id >= vocab || min_id < 0) {
      const auto at = first_id_outside(*source, vocab);
      if (!at) continue;  // a stale sidecar: the ids themselves are fine
      int64_t id = 0;
      source->read(*at, 1, &id);
      std::string where = fmt::format("token position {}", *at);
      if (const auto* megatron = dynamic_cast<const MegatronSource*>(source.get())) {
        int64_t lo = 0;
        int64_t hi = static_cast<int64_t>(megatron->header().sequence_count) - 1;
        while (lo < hi) {  // the last sequence starting at or before the position
          const int64_t mid = (lo + hi + 1) / 2;
          if (megatron->sequence_start(mid) <= *at) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        where += fmt::format(" (sequence {}, its token {})", lo, *at - megatron->sequence_start(lo));
      }
      problems.push_back(fmt::format(
          "{}: model.vocab_size: {}: the id {} at {} is outside [0, model.vocab_size = {}) and would index past "
          "the embedding (fix: {})",
          spec.source, file, id, where, vocab,
          id < 0 || *max_id >= 1'000'000
              ? "check data.dtype (the file may hold ids of another width) or re-tokenize the data"
              : fmt::format("set model.vocab_size above the largest id ({}): {}, check data.dtype, or re-tokenize "
                            "the data",
                            *max_id, *max_id + 1)));
    }
  }
  if (!problems.empty()) throw ConfigError(problems);
}

}  // namespace ppctl::data
