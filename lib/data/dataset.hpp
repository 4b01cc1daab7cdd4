// The training and held-out samples of a job: windows of seq_len + 1 tokens over each corpus of
// data.path or data.blend (or packed conversations of a chat dataset), shuffled per dataset and epoch, blended
// by weight. No torch: callers copy the ids into tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "data/blend.hpp"
#include "data/packed_corpus.hpp"
#include "data/shuffle.hpp"
#include "data/token_source.hpp"

namespace ppctl::data {

/// Samples over one or more token sources.
///
/// Windows: a source of T tokens holds W = floor((T - 1) / seq_len) windows; window k holds the input
/// tokens [k seq_len, k seq_len + seq_len) and the targets shifted by one token (windows cross
/// document boundaries, as Megatron's GPTDataset and nanoGPT do). Its last E = held_out_sequences(W,
/// data.eval_fraction) windows are held out; the N = W - E before them train.
/// Training sample i: BlendCursor picks dataset d and its position c (the c-th sample dataset d
/// supplies); the window is WindowOrder_d.at(c) (epoch c / N_d). With one source c = i, so a text
/// spec sees exactly the samples ppctl gave before blends existed.
/// Held-out sample i: a second cursor over the same weights picks (d, c); the window is N_d + (c mod
/// E_d), in stream order, the same at every evaluation.
/// Every sample depends only on (sources, weights, seq_len, seed, eval_fraction, i): never on the
/// partition, the rank or the microbatch split. Not thread-safe (cursors and shuffle caches).
/// A chat dataset (data.format megatron with PREFIX.loss_mask beside PREFIX) is a PackedCorpus: its windows are
/// packs of whole conversations (data/packed_corpus.hpp), with the same shuffle, blend and held-out numbering.
class Dataset {
 public:
  /// Opens every source of spec.data.sources (open_token_source) with model.seq_len, train.seed
  /// and data.eval_fraction. Throws ppctl::Error naming the source when a file cannot be opened or a
  /// source holds no training window.
  explicit Dataset(const config::JobSpec& spec);
  /// The same over given sources (tests, tools); `weights` one per source, > 0.
  Dataset(std::vector<std::unique_ptr<TokenSource>> sources, std::vector<double> weights, int64_t seq_len,
          uint64_t seed, double eval_fraction);
  /// A dataset of one chat corpus (tests, tools): its windows and held-out windows as packed.
  Dataset(std::unique_ptr<PackedCorpus> corpus, uint64_t seed);

  int64_t num_datasets() const { return static_cast<int64_t>(datasets_.size()); }
  /// Training windows N_d of dataset `d` (one epoch).
  int64_t num_sequences(int64_t d = 0) const { return datasets_.at(static_cast<size_t>(d)).windows; }
  /// Held-out windows E_d of dataset `d` (0 without data.eval_fraction).
  int64_t num_eval_sequences(int64_t d = 0) const { return datasets_.at(static_cast<size_t>(d)).eval_windows; }
  /// The token stream of dataset `d`; asserts that it is not a chat dataset.
  const TokenSource& source(int64_t d) const;
  /// The chat corpus of dataset `d`, or null when it is a token stream.
  const PackedCorpus* packed(int64_t d) const { return datasets_.at(static_cast<size_t>(d)).packed.get(); }
  /// Whether any dataset is a chat corpus: samples then carry target masks, positions and document numbers that
  /// every pipeline stage needs (attention stays within a conversation).
  bool packed() const;
  int64_t seq_len() const { return seq_len_; }

  /// Which dataset and window training sample `index` reads (see the class comment).
  struct Window {
    int64_t dataset = 0;
    int64_t window = 0;
    int64_t epoch = 0;
  };
  Window train_window(int64_t index) const;
  /// Which dataset and window held-out sample `index` reads. Asserts that the dataset has held-out
  /// windows (InternalError).
  Window eval_window(int64_t index) const;

  /// Writes training sample `index` (>= the resume position): seq_len input ids to `tokens`, the
  /// next-token targets to `targets` (each a buffer of seq_len int64). Logs (spdlog, info) the first
  /// sample of every epoch >= 1 of a dataset it reads, with its step when set_samples_per_step was
  /// called.
  void sample(int64_t index, int64_t* tokens, int64_t* targets) const;
  /// Writes held-out sample `index` (>= 0).
  void eval_sample(int64_t index, int64_t* tokens, int64_t* targets) const;
  /// The same with every field of the sample: a window of a token stream has target mask 1, positions 0 ..
  /// seq_len - 1 and document 0 everywhere; a chat window has its own (PackedCorpus::read).
  void sample(int64_t index, const SampleFields& out) const;
  void eval_sample(int64_t index, const SampleFields& out) const;
  /// Target tokens of training sample `index` / held-out sample `index`: seq_len for a token stream's window,
  /// the ones of its target mask for a chat window. Reads nothing for a token stream.
  int64_t sample_targets(int64_t index) const;
  int64_t eval_sample_targets(int64_t index) const;

  /// The blend's position after `next_sample` training samples (saved in checkpoints).
  BlendPosition position(int64_t next_sample) const;
  /// Continues the training stream from a checkpoint's position (its counts must be the ones
  /// position() gives: the checkpoint code checks them against the spec first).
  void seek(const BlendPosition& position);
  /// Samples per optimizer step (the global batch), so the epoch log names the step (from 1).
  void set_samples_per_step(int64_t samples) { samples_per_step_ = samples; }

  /// The stream index of sequence `i` of microbatch `microbatch` at optimizer step `step`, for a
  /// global batch of `microbatches` x `micro_batch_size` sequences: consecutive, so every step sees
  /// fresh data and the same global batch whatever the pipeline layout.
  static int64_t stream_index(int64_t step, int64_t microbatch, int64_t i, int64_t microbatches,
                              int64_t micro_batch_size);

 private:
  struct Part {
    std::unique_ptr<TokenSource> source;   // a token stream, or
    std::unique_ptr<PackedCorpus> packed;  // a chat corpus
    int64_t windows = 0;
    int64_t eval_windows = 0;
    WindowOrder order;
    mutable int64_t logged_epoch = 0;
  };
  /// Dataset `d` as a token stream (windows over it, the last held out) or as a chat corpus (its packs).
  Part stream_part(size_t d, std::unique_ptr<TokenSource> source, uint64_t seed, double eval_fraction) const;
  Part packed_part(size_t d, std::unique_ptr<PackedCorpus> corpus, uint64_t seed) const;
  void read_window(const Window& w, const SampleFields& out) const;
  int64_t window_targets(const Window& w) const;
  std::string describe(const Part& part) const;

  int64_t seq_len_;
  std::vector<Part> datasets_;
  mutable BlendCursor train_cursor_;
  mutable BlendCursor eval_cursor_;
  int64_t samples_per_step_ = 0;
};

/// The blend position of spec's training stream after `next_sample` samples (what a checkpoint
/// stores): {n, {n}} for one source, else BlendCursor walked from 0 (O(next_sample x sources) time,
/// O(sources) memory). Needs no file.
BlendPosition training_position(const config::JobSpec& spec, int64_t next_sample);

/// The data sources of `spec` as a checkpoint records them, one line per source: `format dtype
/// weight` (not the paths, so a moved corpus resumes), and for a chat dataset ` chat conversations=C tokens=T
/// overlong=RULE` (its windows depend on them). With the same token counts, two specs with the same description
/// read the same stream. Looks for the loss masks beside a megatron source (one stat each) and maps a chat
/// dataset's index; throws DataError as MegatronSource does.
std::vector<std::string> describe_sources(const config::JobSpec& spec);

/// Windows of model.seq_len + 1 tokens (stride seq_len) in a stream of `tokens` tokens: floor((tokens
/// - 1) / seq_len), 0 when tokens <= seq_len.
int64_t windows_in(int64_t tokens, int64_t seq_len);

}  // namespace ppctl::data
