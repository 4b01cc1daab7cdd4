// Test support: the small GPT-2 job spec the memory-estimate tests share (8 blocks, hidden 64, 4 heads,
// seq_len 32, micro_batch_size 2; the other fields at their defaults).
#pragma once

#include "config/job_spec.hpp"

namespace ppctl::test {

inline config::JobSpec memory_test_spec() {
  config::JobSpec spec;
  spec.model.layers = 8;
  spec.model.hidden = 64;
  spec.model.heads = 4;
  spec.model.seq_len = 32;
  spec.pipeline.micro_batch_size = 2;
  return spec;
}

}  // namespace ppctl::test
