// A chat dataset as training windows: the conversations of a Megatron indexed dataset PREFIX.bin/.idx and their
// loss masks PREFIX.loss_mask.bin/.idx (`ppctl data prepare --input-format chat`), packed whole into windows of
// model.seq_len positions, with per-token positions, document numbers and target masks. No torch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "data/megatron_source.hpp"
#include "data/packing.hpp"

namespace ppctl::data {

/// Where one window's per-position fields go: buffers of seq_len elements each. `tokens` and `targets` are
/// required; the others may be null (not wanted).
struct SampleFields {
  int64_t* tokens = nullptr;     ///< input token ids
  int64_t* targets = nullptr;    ///< the id each position predicts (0 where target_mask is 0)
  float* target_mask = nullptr;  ///< 1 where the prediction is a target of the loss, else 0
  int64_t* positions = nullptr;  ///< position of the token in its conversation (RoPE, learned positions)
  int64_t* documents = nullptr;  ///< which conversation of the window (0, 1, ...); padding -1
};

/// The file name stem of the loss masks beside a chat dataset PREFIX: PREFIX.loss_mask (.bin, .idx).
std::string loss_mask_prefix(const std::string& prefix);
/// Whether PREFIX.loss_mask.idx exists: the megatron dataset at PREFIX is a chat dataset that is packed.
bool has_loss_masks(const std::string& prefix);

/// Whether any source of `spec` is a chat dataset (a megatron source with loss masks): then every pipeline stage
/// reads the data (each needs the microbatches' positions and conversation boundaries).
bool has_chat_data(const config::JobSpec& spec);

/// The plan's lines on packing, one per chat dataset of `spec` ("" without one): "packing    PREFIX: C
/// conversations in W windows of seq_len (efficiency E% of positions hold tokens; targets T% of the tokens), H
/// held out in V window(s); N longer than seq_len dropped / truncated; K empty, left out", C and H counting the
/// conversations packed. Reads every window once (the targets).
/// Throws DataError as PackedCorpus does.
std::string format_packing(const config::JobSpec& spec);
/// `plan_text` (schedule::format_plan's) with format_packing's lines after its `data` line (at the end when it has
/// none): what `ppctl plan` prints and the run directory's plan.txt holds.
std::string with_packing(const config::JobSpec& spec, std::string plan_text);

/// The windows of a chat dataset.
///
/// Conversation d (sequence d of the index) has tokens c_0 .. c_{n-1} and mask bits k_0 .. k_{n-1} (k_j = 1:
/// token j is a target, predicted from the tokens before it). In a window it occupies n consecutive positions
/// o .. o + n - 1: position o + j holds c_j, its position id is j (restarting at every conversation), its target
/// is c_{j+1} with mask k_{j+1}; the conversation's last position predicts nothing (mask 0), so no token
/// predicts the next conversation's first. Positions after the last conversation are padding: token 0, target
/// 0, mask 0, document -1 (attention keeps them to themselves, so the id is never seen by a real token; it is
/// not the end-of-sequence id's stand-in, which the loss would then never learn: TRL #976).
/// The last `held_out_sequences(D, eval_fraction)` conversations are held out and packed apart; both sets are
/// packed by pack_documents with `overlong`.
class PackedCorpus {
 public:
  /// Opens PREFIX and PREFIX.loss_mask, checks that they hold the same number of sequences with the same
  /// lengths, and packs. Throws DataError naming the files: a missing or bad file, counts or lengths that
  /// differ (the first sequence that differs), with Overlong::Error a conversation longer than seq_len (the
  /// first, 1-based, its length and how many there are, and the fixes), no training window left.
  PackedCorpus(const std::string& prefix, int64_t seq_len, double eval_fraction, config::Overlong overlong);

  /// Training windows; held-out windows follow them in read()'s numbering.
  int64_t train_windows() const { return static_cast<int64_t>(train_.packs.size()); }
  int64_t eval_windows() const { return static_cast<int64_t>(eval_.packs.size()); }
  /// Writes window `window` (0 <= window < train_windows() + eval_windows()) into `out`.
  void read(int64_t window, const SampleFields& out) const;
  /// Target tokens of window `window` (the ones of its target mask), read once and cached.
  int64_t targets(int64_t window) const;
  /// Target tokens of all training windows / all held-out windows (reads every window once).
  int64_t train_targets() const;
  int64_t eval_targets() const;

  const Packing& train_packing() const { return train_; }
  const Packing& eval_packing() const { return eval_; }
  int64_t seq_len() const { return seq_len_; }
  const MegatronSource& tokens() const { return tokens_; }
  std::string describe() const { return tokens_.describe() + " (chat, packed)"; }

 private:
  const Pack& pack(int64_t window) const;
  /// First sequence of the held-out conversations (D when none are held out).
  int64_t first_held_out_ = 0;
  int64_t seq_len_;
  MegatronSource tokens_;
  MegatronSource masks_;
  Packing train_;
  Packing eval_;
  mutable std::vector<int64_t> targets_;  // -1: not counted yet
};

}  // namespace ppctl::data
