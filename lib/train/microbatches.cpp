// Microbatch tensors from the byte dataset.
#include "train/microbatches.hpp"

#include "core/check.hpp"

namespace ppctl::train {

runtime::MicrobatchData microbatch(const data::TextDataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index, int64_t replica,
                                   int64_t replicas) {
  const int64_t mbs = spec.pipeline.micro_batch_size;
  const int64_t seq = spec.model.seq_len;
  runtime::MicrobatchData out;
  out.tokens = torch::empty({mbs, seq}, torch::kLong);
  out.targets = torch::empty({mbs, seq}, torch::kLong);
  for (int64_t i = 0; i < mbs; ++i) {
    const int64_t m = spec.pipeline.microbatches;
    const int64_t index =
        data::TextDataset::stream_index(step, replica * m + microbatch_index, i, replicas * m, mbs);
    dataset.sample(index, out.tokens[i].data_ptr<int64_t>(), out.targets[i].data_ptr<int64_t>());
  }
  return out;
}

runtime::MicrobatchSource microbatch_source(const data::TextDataset* dataset,
                                            const config::JobSpec& spec, int64_t step,
                                            int64_t replica, int64_t replicas) {
  return [dataset, &spec, step, replica, replicas](int64_t microbatch_index) {
    PPCTL_ASSERT(dataset != nullptr, "a stage without data asked for a microbatch");
    return microbatch(*dataset, spec, step, microbatch_index, replica, replicas);
  };
}

}  // namespace ppctl::train
