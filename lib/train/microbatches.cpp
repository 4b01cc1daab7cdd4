// Microbatch tensors from the byte dataset (training and held-out).
#include "train/microbatches.hpp"

#include "core/check.hpp"

namespace ppctl::train {
namespace {

/// Tensors [micro_batch_size, seq_len] of replica `replica`'s microbatch j: sequences
/// stream_index(step, replica x m + j, i, replicas x m, mbs) for i < micro_batch_size, written by
/// `write(index, tokens, targets)`.
template <typename Write>
runtime::MicrobatchData gather(const config::JobSpec& spec, int64_t step, int64_t microbatch_index,
                               int64_t replica, int64_t replicas, const Write& write) {
  const int64_t mbs = spec.pipeline.micro_batch_size;
  const int64_t seq = spec.model.seq_len;
  const int64_t m = spec.pipeline.microbatches;
  runtime::MicrobatchData out;
  out.tokens = torch::empty({mbs, seq}, torch::kLong);
  out.targets = torch::empty({mbs, seq}, torch::kLong);
  for (int64_t i = 0; i < mbs; ++i) {
    const int64_t index =
        data::Dataset::stream_index(step, replica * m + microbatch_index, i, replicas * m, mbs);
    write(index, out.tokens[i].data_ptr<int64_t>(), out.targets[i].data_ptr<int64_t>());
  }
  return out;
}

}  // namespace

runtime::MicrobatchData microbatch(const data::Dataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index, int64_t replica,
                                   int64_t replicas) {
  return gather(spec, step, microbatch_index, replica, replicas,
                [&dataset](int64_t index, int64_t* tokens, int64_t* targets) {
                  dataset.sample(index, tokens, targets);
                });
}

runtime::MicrobatchSource microbatch_source(const data::Dataset* dataset,
                                            const config::JobSpec& spec, int64_t step,
                                            int64_t replica, int64_t replicas) {
  return [dataset, &spec, step, replica, replicas](int64_t microbatch_index) {
    PPCTL_ASSERT(dataset != nullptr, "a stage without data asked for a microbatch");
    return microbatch(*dataset, spec, step, microbatch_index, replica, replicas);
  };
}

runtime::MicrobatchSource eval_microbatch_source(const data::Dataset* dataset,
                                                 const config::JobSpec& spec, int64_t batch,
                                                 int64_t replica, int64_t replicas) {
  return [dataset, &spec, batch, replica, replicas](int64_t microbatch_index) {
    PPCTL_ASSERT(dataset != nullptr, "a stage without data asked for a microbatch");
    return gather(spec, batch, microbatch_index, replica, replicas,
                  [dataset](int64_t index, int64_t* tokens, int64_t* targets) {
                    dataset->eval_sample(index, tokens, targets);
                  });
  };
}

}  // namespace ppctl::train
