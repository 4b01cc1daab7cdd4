// Dataset: windows, held-out split, per-dataset shuffle and the blend, put together.
#include "data/dataset.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/check.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::data {
namespace {

/// One opened source of the spec: a token stream, or a chat corpus (a megatron PREFIX with loss masks).
struct Opened {
  std::unique_ptr<TokenSource> stream;
  std::unique_ptr<PackedCorpus> packed;
};

/// Opens every source. A file found at validation can be gone or unreadable by now (a worker opens it
/// later, on another node, as another user): its DataError then names the spec and the field too.
std::vector<Opened> open_all(const config::JobSpec& spec) {
  std::vector<Opened> sources;
  for (size_t i = 0; i < spec.data.sources.size(); ++i) {
    const auto& source = spec.data.sources[i];
    try {
      if (source.format == config::DataFormat::Megatron && has_loss_masks(source.files.at(0))) {
        sources.push_back({nullptr, std::make_unique<PackedCorpus>(source.files.at(0), spec.model.seq_len,
                                                                   spec.data.eval_fraction, spec.data.overlong)});
      } else {
        sources.push_back({open_token_source(source), nullptr});
      }
    } catch (const DataError& e) {
      const std::string field = spec.data.paths.empty() ? fmt::format("data.blend[{}].path", i) : "data.path";
      throw DataError(fmt::format("{}: {}: {}", spec.source, field, e.what()));
    }
  }
  return sources;
}

std::vector<double> weights_of(const config::JobSpec& spec) {
  std::vector<double> weights;
  for (const auto& s : spec.data.sources) weights.push_back(s.weight);
  return weights;
}

}  // namespace

int64_t windows_in(int64_t tokens, int64_t seq_len) { return tokens <= seq_len ? 0 : (tokens - 1) / seq_len; }

Dataset::Dataset(const config::JobSpec& spec)
    : seq_len_(spec.model.seq_len), train_cursor_(weights_of(spec)), eval_cursor_(weights_of(spec)) {
  auto opened = open_all(spec);
  for (size_t d = 0; d < opened.size(); ++d) {
    datasets_.push_back(opened[d].packed ? packed_part(d, std::move(opened[d].packed), spec.train.seed)
                                         : stream_part(d, std::move(opened[d].stream), spec.train.seed,
                                                       spec.data.eval_fraction));
  }
}

Dataset::Dataset(std::vector<std::unique_ptr<TokenSource>> sources, std::vector<double> weights, int64_t seq_len,
                 uint64_t seed, double eval_fraction)
    : seq_len_(seq_len), train_cursor_(weights), eval_cursor_(weights) {
  PPCTL_ASSERT(sources.size() == weights.size() && !sources.empty(), "one weight per source");
  for (size_t d = 0; d < sources.size(); ++d) {
    datasets_.push_back(stream_part(d, std::move(sources[d]), seed, eval_fraction));
  }
}

Dataset::Dataset(std::unique_ptr<PackedCorpus> corpus, uint64_t seed)
    : seq_len_(corpus->seq_len()), train_cursor_({1.0}), eval_cursor_({1.0}) {
  datasets_.push_back(packed_part(0, std::move(corpus), seed));
}

Dataset::Part Dataset::stream_part(size_t d, std::unique_ptr<TokenSource> source, uint64_t seed,
                                   double eval_fraction) const {
  const int64_t tokens = source->num_tokens();
  const int64_t windows = windows_in(tokens, seq_len_);
  const int64_t held_out = windows == 0 ? 0 : config::held_out_sequences(windows, eval_fraction);
  if (windows - held_out < 1) {
    throw DataError(fmt::format("data: {} holds {} tokens: {} window(s) of model.seq_len + 1 = {} tokens, {} held out "
                            "by data.eval_fraction {:g}, leaving none to train on (fix: add data, lower "
                            "model.seq_len, or lower data.eval_fraction)",
                            source->describe(), tokens, windows, seq_len_ + 1, held_out, eval_fraction));
  }
  const auto n = windows - held_out;
  return Part{std::move(source), nullptr, n, held_out, WindowOrder(n, seed, static_cast<int64_t>(d)), 0};
}

Dataset::Part Dataset::packed_part(size_t d, std::unique_ptr<PackedCorpus> corpus, uint64_t seed) const {
  PPCTL_ASSERT(corpus->seq_len() == seq_len_, "a chat corpus packed for another seq_len");
  const int64_t n = corpus->train_windows(), held_out = corpus->eval_windows();
  return Part{nullptr, std::move(corpus), n, held_out, WindowOrder(n, seed, static_cast<int64_t>(d)), 0};
}

const TokenSource& Dataset::source(int64_t d) const {
  const Part& part = datasets_.at(static_cast<size_t>(d));
  PPCTL_ASSERT(part.source != nullptr, fmt::format("dataset {} is a chat corpus, not a token stream", d));
  return *part.source;
}

bool Dataset::packed() const {
  return std::any_of(datasets_.begin(), datasets_.end(), [](const Part& p) { return p.packed != nullptr; });
}

std::string Dataset::describe(const Part& part) const {
  return part.packed ? part.packed->describe() : part.source->describe();
}

Dataset::Window Dataset::train_window(int64_t index) const {
  const auto pick = datasets_.size() == 1 ? BlendCursor::Pick{0, index} : train_cursor_.at(index);
  const Part& part = datasets_[static_cast<size_t>(pick.dataset)];
  return {pick.dataset, part.order.at(pick.position), pick.position / part.windows};
}

Dataset::Window Dataset::eval_window(int64_t index) const {
  const auto pick = datasets_.size() == 1 ? BlendCursor::Pick{0, index} : eval_cursor_.at(index);
  const Part& part = datasets_[static_cast<size_t>(pick.dataset)];
  PPCTL_ASSERT(part.eval_windows > 0, "eval_sample: no held-out windows (data.eval_fraction is 0)");
  return {pick.dataset, part.windows + pick.position % part.eval_windows, 0};
}

void Dataset::read_window(const Window& w, const SampleFields& out) const {
  const Part& part = datasets_[static_cast<size_t>(w.dataset)];
  if (part.packed) {
    part.packed->read(w.window, out);
    return;
  }
  part.source->read(w.window * seq_len_, seq_len_, out.tokens);
  part.source->read(w.window * seq_len_ + 1, seq_len_, out.targets);
  for (int64_t j = 0; j < seq_len_; ++j) {
    if (out.target_mask) out.target_mask[j] = 1.0F;
    if (out.positions) out.positions[j] = j;
    if (out.documents) out.documents[j] = 0;
  }
}

int64_t Dataset::window_targets(const Window& w) const {
  const Part& part = datasets_[static_cast<size_t>(w.dataset)];
  return part.packed ? part.packed->targets(w.window) : seq_len_;
}

void Dataset::sample(int64_t index, int64_t* tokens, int64_t* targets) const {
  sample(index, SampleFields{tokens, targets});
}

void Dataset::eval_sample(int64_t index, int64_t* tokens, int64_t* targets) const {
  eval_sample(index, SampleFields{tokens, targets});
}

void Dataset::sample(int64_t index, const SampleFields& out) const {
  const Window w = train_window(index);
  const Part& part = datasets_[static_cast<size_t>(w.dataset)];
  if (w.epoch > part.logged_epoch) {
    part.logged_epoch = w.epoch;
    spdlog::info("data: epoch {} of {} starts at {}training sample {}", w.epoch, describe(part),
                 samples_per_step_ > 0 ? fmt::format("step {}, ", index / samples_per_step_ + 1) : "", index);
  }
  read_window(w, out);
}

void Dataset::eval_sample(int64_t index, const SampleFields& out) const { read_window(eval_window(index), out); }

int64_t Dataset::sample_targets(int64_t index) const { return window_targets(train_window(index)); }

int64_t Dataset::eval_sample_targets(int64_t index) const { return window_targets(eval_window(index)); }

BlendPosition Dataset::position(int64_t next_sample) const {
  if (datasets_.size() == 1) return {next_sample, {next_sample}};
  return train_cursor_.position(next_sample);
}

void Dataset::seek(const BlendPosition& position) {
  if (datasets_.size() > 1) train_cursor_.seek(position);
  for (size_t d = 0; d < datasets_.size(); ++d) {  // an epoch begun before the checkpoint is not logged again
    const auto count = position.counts.at(d);
    datasets_[d].logged_epoch = count == 0 ? 0 : (count - 1) / datasets_[d].windows;
  }
}

BlendPosition training_position(const config::JobSpec& spec, int64_t next_sample) {
  if (spec.data.sources.size() <= 1) return {next_sample, {next_sample}};
  return BlendCursor(weights_of(spec)).position(next_sample);
}

std::vector<std::string> describe_sources(const config::JobSpec& spec) {
  std::vector<std::string> lines;
  for (const auto& s : spec.data.sources) {
    // Not the paths: a corpus moved or copied elsewhere (another spec folder) continues the same stream.
    std::string line = fmt::format("{} {} {:.17g}", config::to_string(s.format),
                                   s.format == config::DataFormat::Tokens ? config::to_string(s.dtype) : "-", s.weight);
    // A chat dataset's windows depend on its conversations and on how overlong ones are packed: another dataset or
    // another rule is another stream.
    if (s.format == config::DataFormat::Megatron && !s.files.empty() && has_loss_masks(s.files[0])) {
      const MegatronSource tokens(s.files[0]);
      line += fmt::format(" chat conversations={} tokens={} overlong={}", tokens.header().sequence_count,
                          tokens.num_tokens(), config::to_string(spec.data.overlong));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

int64_t Dataset::stream_index(int64_t step, int64_t microbatch, int64_t i, int64_t microbatches,
                              int64_t micro_batch_size) {
  return (step * microbatches + microbatch) * micro_batch_size + i;
}

}  // namespace ppctl::data
