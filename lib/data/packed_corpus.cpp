// PackedCorpus: a chat dataset's conversations and loss masks, checked against each other and packed into windows.
#include "data/packed_corpus.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>

#include "core/bad_input.hpp"
#include "core/check.hpp"

namespace ppctl::data {
namespace {

/// The lengths of sequences [begin, end) of `source`.
std::vector<int64_t> lengths_of(const MegatronSource& source, int64_t begin, int64_t end) {
  std::vector<int64_t> lengths;
  lengths.reserve(static_cast<size_t>(end - begin));
  for (int64_t s = begin; s < end; ++s) lengths.push_back(source.sequence_length(s));
  return lengths;
}

/// With Overlong::Error: refuses the dataset when a conversation is longer than a window.
void refuse_overlong(const MegatronSource& tokens, int64_t seq_len) {
  const auto sequences = static_cast<int64_t>(tokens.header().sequence_count);
  int64_t first = -1, count = 0, longest = 0;
  for (int64_t s = 0; s < sequences; ++s) {
    const int64_t length = tokens.sequence_length(s);
    if (length <= seq_len) continue;
    if (first < 0) first = s;
    ++count;
    longest = std::max(longest, length);
  }
  if (count == 0) return;
  throw DataError(fmt::format(
      "{}: conversation {} (1-based, in the order data prepare wrote them) has {} tokens, more than model.seq_len "
      "{}: a conversation is packed whole into one window ({} of {} conversations are longer; the longest has {} "
      "tokens) (fix: set data.overlong: drop or data.overlong: truncate, or raise model.seq_len, to {} to fit "
      "them all where the model's positions allow it)",
      tokens.describe(), first + 1, tokens.sequence_length(first), seq_len, count, sequences, longest, longest));
}

/// The loss masks beside chat dataset `prefix`: a missing or bad file is named as the mask half of the dataset.
MegatronSource open_masks(const std::string& prefix) {
  try {
    return MegatronSource(loss_mask_prefix(prefix));
  } catch (const DataError& e) {
    throw DataError(fmt::format("the loss masks of the chat dataset {} cannot be used: {} (fix: prepare the dataset "
                                "again with `ppctl data prepare --input-format chat`, which writes {}.bin and .idx "
                                "with the ids; or remove {}.* to train on every token as plain data)",
                                prefix, e.what(), loss_mask_prefix(prefix), loss_mask_prefix(prefix)));
  }
}

}  // namespace

std::string loss_mask_prefix(const std::string& prefix) { return prefix + ".loss_mask"; }

bool has_loss_masks(const std::string& prefix) {
  struct stat st {};
  return ::stat((loss_mask_prefix(prefix) + ".idx").c_str(), &st) == 0;
}

bool has_chat_data(const config::JobSpec& spec) {
  return std::any_of(spec.data.sources.begin(), spec.data.sources.end(), [](const config::DataSource& source) {
    return source.format == config::DataFormat::Megatron && !source.files.empty() && has_loss_masks(source.files[0]);
  });
}

PackedCorpus::PackedCorpus(const std::string& prefix, int64_t seq_len, double eval_fraction, config::Overlong overlong)
    : seq_len_(seq_len), tokens_(prefix), masks_(open_masks(prefix)) {
  const auto sequences = static_cast<int64_t>(tokens_.header().sequence_count);
  if (static_cast<int64_t>(masks_.header().sequence_count) != sequences) {
    throw DataError(fmt::format("{}: {} sequences, but its loss masks {} hold {} (fix: prepare the dataset again: "
                                "both files come from one `ppctl data prepare --input-format chat`)",
                                tokens_.describe(), sequences, masks_.describe(), masks_.header().sequence_count));
  }
  for (int64_t s = 0; s < sequences; ++s) {
    if (tokens_.sequence_length(s) == masks_.sequence_length(s)) continue;
    throw DataError(fmt::format("{}: conversation {} (1-based) has {} tokens, but its loss mask in {} has {} (fix: "
                                "prepare the dataset again: both files come from one `ppctl data prepare "
                                "--input-format chat`)",
                                tokens_.describe(), s + 1, tokens_.sequence_length(s), masks_.describe(),
                                masks_.sequence_length(s)));
  }
  if (overlong == config::Overlong::Error) refuse_overlong(tokens_, seq_len);
  const int64_t held_out = sequences == 0 ? 0 : config::held_out_sequences(sequences, eval_fraction);
  first_held_out_ = sequences - held_out;
  train_ = pack_documents(lengths_of(tokens_, 0, first_held_out_), seq_len, overlong);
  eval_ = pack_documents(lengths_of(tokens_, first_held_out_, sequences), seq_len, overlong);
  if (train_.packs.empty()) {
    throw DataError(fmt::format("{}: no conversation to train on: {} conversation(s), {} held out by "
                                "data.eval_fraction {:g}, {} longer than model.seq_len {} and dropped, {} empty (fix: "
                                "add conversations, lower data.eval_fraction, or set data.overlong: truncate)",
                                tokens_.describe(), sequences, held_out, eval_fraction, train_.dropped, seq_len,
                                train_.empty));
  }
  targets_.assign(static_cast<size_t>(train_windows() + eval_windows()), -1);
}

const Pack& PackedCorpus::pack(int64_t window) const {
  PPCTL_ASSERT(0 <= window && window < train_windows() + eval_windows(),
               fmt::format("window {} of a chat dataset with {} + {}", window, train_windows(), eval_windows()));
  return window < train_windows() ? train_.packs[static_cast<size_t>(window)]
                                  : eval_.packs[static_cast<size_t>(window - train_windows())];
}

void PackedCorpus::read(int64_t window, const SampleFields& out) const {
  PPCTL_ASSERT(out.tokens != nullptr && out.targets != nullptr, "PackedCorpus::read needs tokens and targets");
  const Pack& p = pack(window);
  const int64_t base = window < train_windows() ? 0 : first_held_out_;
  std::vector<int64_t> mask(static_cast<size_t>(seq_len_));
  int64_t at = 0, document = 0;
  for (const auto& piece : p.pieces) {
    const int64_t sequence = base + piece.document, n = piece.length;
    tokens_.read(tokens_.sequence_start(sequence), n, out.tokens + at);
    masks_.read(masks_.sequence_start(sequence), n, mask.data());
    for (int64_t j = 0; j < n; ++j) {
      const bool last = j + 1 == n;
      out.targets[at + j] = last ? 0 : out.tokens[at + j + 1];
      if (out.target_mask) out.target_mask[at + j] = !last && mask[static_cast<size_t>(j + 1)] != 0 ? 1.0F : 0.0F;
      if (out.positions) out.positions[at + j] = j;
      if (out.documents) out.documents[at + j] = document;
    }
    at += n;
    ++document;
  }
  for (int64_t j = at; j < seq_len_; ++j) {  // padding
    out.tokens[j] = 0;
    out.targets[j] = 0;
    if (out.target_mask) out.target_mask[j] = 0.0F;
    if (out.positions) out.positions[j] = j - at;
    if (out.documents) out.documents[j] = -1;
  }
}

int64_t PackedCorpus::train_targets() const {
  int64_t total = 0;
  for (int64_t w = 0; w < train_windows(); ++w) total += targets(w);
  return total;
}

int64_t PackedCorpus::eval_targets() const {
  int64_t total = 0;
  for (int64_t w = train_windows(); w < train_windows() + eval_windows(); ++w) total += targets(w);
  return total;
}

int64_t PackedCorpus::targets(int64_t window) const {
  auto& cached = targets_[static_cast<size_t>(window)];
  if (cached >= 0) return cached;
  std::vector<int64_t> tokens(static_cast<size_t>(seq_len_)), targets(static_cast<size_t>(seq_len_));
  std::vector<float> mask(static_cast<size_t>(seq_len_));
  read(window, {tokens.data(), targets.data(), mask.data(), nullptr, nullptr});
  cached = static_cast<int64_t>(std::count(mask.begin(), mask.end(), 1.0F));
  return cached;
}

std::string format_packing(const config::JobSpec& spec) {
  std::string out;
  for (const auto& source : spec.data.sources) {
    if (source.format != config::DataFormat::Megatron || !has_loss_masks(source.files.at(0))) continue;
    const PackedCorpus corpus(source.files.at(0), spec.model.seq_len, spec.data.eval_fraction, spec.data.overlong);
    const auto& train = corpus.train_packing();
    const int64_t targets = corpus.train_targets();
    const auto& held = corpus.eval_packing();
    const auto held_out = held.documents - held.dropped - held.empty;
    const auto overlong = train.dropped + train.truncated + held.dropped + held.truncated;
    out += fmt::format(
        "packing    {}: {} conversation(s) in {} window(s) of {} (efficiency {:.1f}% of positions hold tokens; targets "
        "{:.1f}% of the tokens){}{}{}\n",
        source.files.at(0), train.documents - train.dropped - train.empty, corpus.train_windows(), spec.model.seq_len,
        100.0 * train.efficiency(spec.model.seq_len),
        train.packed_tokens > 0 ? 100.0 * static_cast<double>(targets) / static_cast<double>(train.packed_tokens) : 0.0,
        held_out > 0 ? fmt::format(", {} held out in {} window(s)", held_out, corpus.eval_windows()) : "",
        overlong > 0 ? fmt::format("; {} longer than seq_len {} (data.overlong: {})", overlong,
                                   spec.data.overlong == config::Overlong::Drop ? "dropped" : "truncated",
                                   config::to_string(spec.data.overlong))
                     : "",
        train.empty + held.empty > 0 ? fmt::format("; {} empty, left out", train.empty + held.empty) : "");
  }
  return out;
}

std::string with_packing(const config::JobSpec& spec, std::string plan_text) {
  const auto packing = format_packing(spec);
  if (packing.empty()) return plan_text;
  const auto data_line = plan_text.find("\ndata ");
  const auto after = data_line == std::string::npos ? std::string::npos : plan_text.find('\n', data_line + 1);
  plan_text.insert(after == std::string::npos ? plan_text.size() : after + 1, packing);
  return plan_text;
}

}  // namespace ppctl::data
