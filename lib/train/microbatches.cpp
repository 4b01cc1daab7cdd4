// Microbatch tensors from the byte dataset (training and held-out).
#include "train/microbatches.hpp"

#include <algorithm>
#include <type_traits>

#include "core/check.hpp"

namespace ppctl::train {
namespace {

/// Tensors [micro_batch_size, seq_len] of replica `replica`'s microbatch j: sequences
/// stream_index(step, replica x m + j, i, replicas x m, mbs) for i < micro_batch_size, written by
/// `write(index, fields)`; with `packed` also the target mask, positions and documents.
template <typename Write>
runtime::MicrobatchData gather(const config::JobSpec& spec, int64_t step, int64_t microbatch_index,
                               int64_t replica, int64_t replicas, bool packed, const Write& write) {
  const int64_t mbs = spec.pipeline.micro_batch_size;
  const int64_t seq = spec.model.seq_len;
  const int64_t m = spec.pipeline.microbatches;
  runtime::MicrobatchData out;
  out.tokens = torch::empty({mbs, seq}, torch::kLong);
  out.targets = torch::empty({mbs, seq}, torch::kLong);
  if (packed) {
    out.target_mask = torch::empty({mbs, seq}, torch::kFloat);
    out.positions = torch::empty({mbs, seq}, torch::kLong);
    out.documents = torch::empty({mbs, seq}, torch::kLong);
  }
  const auto row = [](const torch::Tensor& t, int64_t i, auto* type) -> decltype(type) {
    return t.defined() ? t[i].data_ptr<std::remove_pointer_t<decltype(type)>>() : nullptr;
  };
  for (int64_t i = 0; i < mbs; ++i) {
    const int64_t index =
        data::Dataset::stream_index(step, replica * m + microbatch_index, i, replicas * m, mbs);
    write(index, data::SampleFields{out.tokens[i].data_ptr<int64_t>(), out.targets[i].data_ptr<int64_t>(),
                                    row(out.target_mask, i, static_cast<float*>(nullptr)),
                                    row(out.positions, i, static_cast<int64_t*>(nullptr)),
                                    row(out.documents, i, static_cast<int64_t*>(nullptr))});
  }
  return out;
}

}  // namespace

runtime::MicrobatchData microbatch(const data::Dataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index, int64_t replica,
                                   int64_t replicas) {
  return gather(spec, step, microbatch_index, replica, replicas, dataset.packed(),
                [&dataset](int64_t index, const data::SampleFields& fields) { dataset.sample(index, fields); });
}

runtime::MicrobatchSource microbatch_source(const data::Dataset* dataset,
                                            const config::JobSpec& spec, int64_t step,
                                            int64_t replica, int64_t replicas) {
  return [dataset, &spec, step, replica, replicas](int64_t microbatch_index) {
    if (dataset == nullptr) return runtime::MicrobatchData{};  // a middle stage of unpacked data
    return microbatch(*dataset, spec, step, microbatch_index, replica, replicas);
  };
}

runtime::MicrobatchSource eval_microbatch_source(const data::Dataset* dataset,
                                                 const config::JobSpec& spec, int64_t batch,
                                                 int64_t replica, int64_t replicas) {
  return [dataset, &spec, batch, replica, replicas](int64_t microbatch_index) {
    if (dataset == nullptr) return runtime::MicrobatchData{};
    return gather(spec, batch, microbatch_index, replica, replicas, dataset->packed(),
                  [dataset](int64_t index, const data::SampleFields& fields) { dataset->eval_sample(index, fields); });
  };
}

int64_t step_target_tokens(const data::Dataset* dataset, const config::JobSpec& spec, int64_t step,
                           int64_t replicas) {
  const int64_t sequences = replicas * spec.pipeline.microbatches * spec.pipeline.micro_batch_size;
  if (dataset == nullptr || !dataset->packed()) return sequences * spec.model.seq_len;
  int64_t targets = 0;
  for (int64_t i = 0; i < sequences; ++i) targets += dataset->sample_targets(step * sequences + i);
  return targets;
}

double loss_scale(int64_t target_tokens, int64_t replicas) {
  return static_cast<double>(replicas) / static_cast<double>(std::max<int64_t>(target_tokens, 1));
}

}  // namespace ppctl::train
