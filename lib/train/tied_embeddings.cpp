// The tied embedding copies' hash line (see tied_embeddings.hpp).
#include "train/tied_embeddings.hpp"

#include <spdlog/spdlog.h>

namespace ppctl::train {

void log_tied_weights(const std::vector<model::StageModule>& stages) {
  for (const auto& stage : stages) {
    const auto weight = stage->tied_weight();
    if (!weight.defined()) continue;
    const auto bytes = weight.detach().cpu().contiguous();
    const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
    uint64_t hash = 14695981039346656037ULL;  // FNV-1a, 64 bit
    for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ data[i]) * 1099511628211ULL;
    spdlog::info("tied embedding on stage {}: fnv1a64 {:016x}", stage->layout().stage, hash);
  }
}

}  // namespace ppctl::train
