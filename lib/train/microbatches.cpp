// Microbatch tensors from the byte dataset.
#include "train/microbatches.hpp"

#include "core/check.hpp"

namespace ppctl::train {

runtime::MicrobatchData microbatch(const data::TextDataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index) {
  const int64_t mbs = spec.pipeline.micro_batch_size;
  const int64_t seq = spec.model.seq_len;
  runtime::MicrobatchData out;
  out.tokens = torch::empty({mbs, seq}, torch::kLong);
  out.targets = torch::empty({mbs, seq}, torch::kLong);
  for (int64_t i = 0; i < mbs; ++i) {
    const int64_t index = data::TextDataset::stream_index(step, microbatch_index, i,
                                                          spec.pipeline.microbatches, mbs);
    dataset.sample(index, out.tokens[i].data_ptr<int64_t>(), out.targets[i].data_ptr<int64_t>());
  }
  return out;
}

runtime::MicrobatchSource microbatch_source(const data::TextDataset* dataset,
                                            const config::JobSpec& spec, int64_t step) {
  return [dataset, &spec, step](int64_t microbatch_index) {
    PPCTL_ASSERT(dataset != nullptr, "a stage without data asked for a microbatch");
    return microbatch(*dataset, spec, step, microbatch_index);
  };
}

}  // namespace ppctl::train
