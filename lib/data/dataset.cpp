// Dataset: windows, held-out split, per-dataset shuffle and the blend, put together.
#include "data/dataset.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/check.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::data {
namespace {

/// Opens every source. A file found at validation can be gone or unreadable by now (a worker opens it
/// later, on another node, as another user): its DataError then names the spec and the field too.
std::vector<std::unique_ptr<TokenSource>> open_all(const config::JobSpec& spec) {
  std::vector<std::unique_ptr<TokenSource>> sources;
  for (size_t i = 0; i < spec.data.sources.size(); ++i) {
    try {
      sources.push_back(open_token_source(spec.data.sources[i]));
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
    : Dataset(open_all(spec), weights_of(spec), spec.model.seq_len, spec.train.seed, spec.data.eval_fraction) {}

Dataset::Dataset(std::vector<std::unique_ptr<TokenSource>> sources, std::vector<double> weights, int64_t seq_len,
                 uint64_t seed, double eval_fraction)
    : seq_len_(seq_len), train_cursor_(weights), eval_cursor_(weights) {
  PPCTL_ASSERT(sources.size() == weights.size() && !sources.empty(), "one weight per source");
  for (size_t d = 0; d < sources.size(); ++d) {
    const int64_t tokens = sources[d]->num_tokens();
    const int64_t windows = windows_in(tokens, seq_len);
    const int64_t held_out = windows == 0 ? 0 : config::held_out_sequences(windows, eval_fraction);
    if (windows - held_out < 1) {
      throw DataError(fmt::format("data: {} holds {} tokens: {} window(s) of model.seq_len + 1 = {} tokens, {} held out "
                              "by data.eval_fraction {:g}, leaving none to train on (fix: add data, lower "
                              "model.seq_len, or lower data.eval_fraction)",
                              sources[d]->describe(), tokens, windows, seq_len + 1, held_out, eval_fraction));
    }
    const auto n = windows - held_out;
    datasets_.push_back(Part{std::move(sources[d]), n, held_out, WindowOrder(n, seed, static_cast<int64_t>(d)), 0});
  }
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

void Dataset::read_window(const Window& w, int64_t* tokens, int64_t* targets) const {
  const TokenSource& source = *datasets_[static_cast<size_t>(w.dataset)].source;
  source.read(w.window * seq_len_, seq_len_, tokens);
  source.read(w.window * seq_len_ + 1, seq_len_, targets);
}

void Dataset::sample(int64_t index, int64_t* tokens, int64_t* targets) const {
  const Window w = train_window(index);
  const Part& part = datasets_[static_cast<size_t>(w.dataset)];
  if (w.epoch > part.logged_epoch) {
    part.logged_epoch = w.epoch;
    spdlog::info("data: epoch {} of {} starts at {}training sample {}", w.epoch, part.source->describe(),
                 samples_per_step_ > 0 ? fmt::format("step {}, ", index / samples_per_step_ + 1) : "", index);
  }
  read_window(w, tokens, targets);
}

void Dataset::eval_sample(int64_t index, int64_t* tokens, int64_t* targets) const {
  read_window(eval_window(index), tokens, targets);
}

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
    lines.push_back(fmt::format("{} {} {:.17g}", config::to_string(s.format),
                                s.format == config::DataFormat::Tokens ? config::to_string(s.dtype) : "-", s.weight));
  }
  return lines;
}

int64_t Dataset::stream_index(int64_t step, int64_t microbatch, int64_t i, int64_t microbatches,
                              int64_t micro_batch_size) {
  return (step * microbatches + microbatch) * micro_batch_size + i;
}

}  // namespace ppctl::data
