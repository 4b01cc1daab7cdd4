// Microbatch tensors from the byte dataset.
#include "train/microbatches.hpp"

#include "core/check.hpp"

namespace ppctl::train {

namespace {

/// Tensors [micro_batch_size, seq_len] of sequences `index`(i) for i < micro_batch_size, written by
/// `write(index, tokens, targets)`.
template <typename Write>
runtime::MicrobatchData gather(const config::JobSpec& spec, int64_t step, int64_t microbatch_index,
                               const Write& write) {
  const int64_t mbs = spec.pipeline.micro_batch_size;
  const int64_t seq = spec.model.seq_len;
  runtime::MicrobatchData out;
  out.tokens = torch::empty({mbs, seq}, torch::kLong);
  out.targets = torch::empty({mbs, seq}, torch::kLong);
  for (int64_t i = 0; i < mbs; ++i) {
    const int64_t index = data::TextDataset::stream_index(step, microbatch_index, i,
                                                          spec.pipeline.microbatches, mbs);
    write(index, out.tokens[i].data_ptr<int64_t>(), out.targets[i].data_ptr<int64_t>());
  }
  return out;
}

}  // namespace

runtime::MicrobatchData microbatch(const data::TextDataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index) {
  return gather(spec, step, microbatch_index, [&dataset](int64_t index, int64_t* tokens, int64_t* targets) {
    dataset.sample(index, tokens, targets);
  });
}

runtime::MicrobatchSource eval_microbatch_source(const data::TextDataset* dataset,
                                                 const config::JobSpec& spec, int64_t batch) {
  return [dataset, &spec, batch](int64_t microbatch_index) {
    PPCTL_ASSERT(dataset != nullptr, "a stage without data asked for a microbatch");
    return gather(spec, batch, microbatch_index, [dataset](int64_t index, int64_t* tokens, int64_t* targets) {
      dataset->eval_sample(index, tokens, targets);
    });
  };
}

runtime::MicrobatchSource microbatch_source(const data::TextDataset* dataset,
                                            const config::JobSpec& spec, int64_t step) {
  return [dataset, &spec, step](int64_t microbatch_index) {
    PPCTL_ASSERT(dataset != nullptr, "a stage without data asked for a microbatch");
    return microbatch(*dataset, spec, step, microbatch_index);
  };
}

}  // namespace ppctl::train
