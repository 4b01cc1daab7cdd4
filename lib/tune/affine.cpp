// The affine time model of `ppctl plan --tune` from two probes (t(b) = a + c x b per piece).
#include "tune/affine.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/error.hpp"

namespace ppctl::tune {
namespace {

/// One time t measured at two micro batch sizes, fitted as a + c x b.
struct Line {
  double a = 0.0;
  double c = 0.0;
  std::string clamp;  ///< why a or c was clamped, or ""
};

Line fit_line(double t_low, int64_t low, double t_high, int64_t high) {
  const double c = (t_high - t_low) / static_cast<double>(high - low);
  const double a = t_low - c * static_cast<double>(low);
  if (c < 0.0) {
    return {(t_low + t_high) / 2.0, 0.0,
            fmt::format("per-sequence part clamped to 0 ({:.4g} ms at mbs {}, {:.4g} ms at mbs {}: the larger "
                        "batch measured faster), fixed part their mean",
                        t_low, low, t_high, high)};
  }
  if (a < 0.0) {
    return {0.0, t_high / static_cast<double>(high),
            fmt::format("fixed part clamped to 0 (the fit gave {:.4g} ms), per-sequence part {:.4g} ms (the time "
                        "at mbs {} over {})",
                        a, t_high / static_cast<double>(high), high, high)};
  }
  return {a, c, ""};
}

}  // namespace

AffineTimes fit_affine(const plan::LayerTimes& first, int64_t first_mbs, const std::string& first_source,
                       const plan::LayerTimes& second, int64_t second_mbs, const std::string& second_source) {
  if (first_mbs <= 0 || second_mbs <= 0 || first_mbs == second_mbs) {
    throw PlanError(fmt::format("--layer-costs: {} and {} were measured at micro_batch_size {} and {}; two probes "
                                "must be at two different positive micro batch sizes to fit a fixed and a "
                                "per-sequence part (fix: measure the second at another pipeline.micro_batch_size, "
                                "e.g. 1, or give --layer-costs once)",
                                first_source, second_source, first_mbs, second_mbs));
  }
  if (first.blocks.size() != second.blocks.size()) {
    throw PlanError(fmt::format("--layer-costs: {} has {} blocks, {} has {}; both probes must be of this model "
                                "(fix: give two measurements of the same model)",
                                first_source, first.blocks.size(), second_source, second.blocks.size()));
  }
  const bool in_order = first_mbs < second_mbs;
  AffineTimes out;
  out.low_mbs = in_order ? first_mbs : second_mbs;
  out.high_mbs = in_order ? second_mbs : first_mbs;
  out.low = in_order ? first : second;
  out.high = in_order ? second : first;
  out.fixed = out.low;
  out.per_sequence = out.low;
  const auto fit_piece = [&](const plan::PieceTime& lo, const plan::PieceTime& hi, plan::PieceTime& a,
                             plan::PieceTime& c, const std::string& name) {
    for (auto [t_lo, t_hi, a_out, c_out, what] :
         {std::tuple{lo.forward_ms, hi.forward_ms, &a.forward_ms, &c.forward_ms, "forward"},
          std::tuple{lo.backward_ms, hi.backward_ms, &a.backward_ms, &c.backward_ms, "backward"}}) {
      const auto line = fit_line(t_lo, out.low_mbs, t_hi, out.high_mbs);
      *a_out = line.a;
      *c_out = line.c;
      if (!line.clamp.empty()) out.clamped.push_back(fmt::format("{} {}: {}", name, what, line.clamp));
    }
  };
  for (size_t i = 0; i < out.low.blocks.size(); ++i)
    fit_piece(out.low.blocks[i], out.high.blocks[i], out.fixed.blocks[i], out.per_sequence.blocks[i],
              fmt::format("block {}", i));
  fit_piece(out.low.embedding, out.high.embedding, out.fixed.embedding, out.per_sequence.embedding, "embedding");
  fit_piece(out.low.head, out.high.head, out.fixed.head, out.per_sequence.head, "head");
  return out;
}

plan::LayerTimes times_at(const AffineTimes& fit, int64_t mbs) {
  if (mbs == fit.low_mbs) return fit.low;
  if (mbs == fit.high_mbs) return fit.high;
  const auto b = static_cast<double>(mbs);
  auto out = fit.fixed;
  const auto at = [b](plan::PieceTime& t, const plan::PieceTime& c) {
    t.forward_ms += c.forward_ms * b;
    t.backward_ms += c.backward_ms * b;
  };
  for (size_t i = 0; i < out.blocks.size(); ++i) at(out.blocks[i], fit.per_sequence.blocks[i]);
  at(out.embedding, fit.per_sequence.embedding);
  at(out.head, fit.per_sequence.head);
  return out;
}

bool extrapolated(const AffineTimes& fit, int64_t mbs) { return mbs < fit.low_mbs || mbs > fit.high_mbs; }

bool searched(const AffineTimes& fit, int64_t mbs) {
  return mbs * kSearchMargin >= fit.low_mbs && mbs <= fit.high_mbs * kSearchMargin;
}

}  // namespace ppctl::tune
