// Tests of tune/affine: the fit t(b) = a + c x b recovers a and c from two probes, a probed micro batch size
// gets that probe's own times, clamps are named, and bad probe pairs are refused.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

#include "core/error.hpp"
#include "tune/affine.hpp"
#include "tune/search.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

/// Times of 3 blocks, an embedding and a head, each piece a[i] + c[i] x mbs with distinct a and c.
plan::LayerTimes synthetic(int64_t mbs) {
  const auto b = static_cast<double>(mbs);
  plan::LayerTimes t;
  for (int i = 0; i < 3; ++i) t.blocks.push_back({0.5 + 0.25 * i + 0.75 * b, 1.0 + 0.125 * i + 1.5 * b});
  t.embedding = {0.25 + 0.0625 * b, 0.5 + 0.125 * b};
  t.head = {2.0 + 1.25 * b, 3.0 + 2.5 * b};
  t.micro_batch_size = mbs;
  return t;
}

void check_piece(const plan::PieceTime& got, const plan::PieceTime& want) {
  CHECK(got.forward_ms == want.forward_ms);
  CHECK(got.backward_ms == want.backward_ms);
}

}  // namespace

TEST_CASE("the affine fit recovers the fixed and per-sequence parts exactly") {
  // Probes given in either order: the fit is the same.
  for (const bool swapped : {false, true}) {
    const auto lo = synthetic(2), hi = synthetic(8);
    const auto fit = swapped ? tune::fit_affine(hi, 8, "hi", lo, 2, "lo") : tune::fit_affine(lo, 2, "lo", hi, 8, "hi");
    CHECK(fit.low_mbs == 2);
    CHECK(fit.high_mbs == 8);
    CHECK(fit.clamped.empty());
    // The values are binary fractions, so a and c come out exact.
    const auto a = synthetic(0);
    for (size_t i = 0; i < 3; ++i) {
      check_piece(fit.fixed.blocks[i], a.blocks[i]);
      CHECK(fit.per_sequence.blocks[i].forward_ms == 0.75);
      CHECK(fit.per_sequence.blocks[i].backward_ms == 1.5);
    }
    check_piece(fit.fixed.embedding, a.embedding);
    check_piece(fit.fixed.head, a.head);
    CHECK(fit.per_sequence.head.forward_ms == 1.25);
    CHECK(fit.per_sequence.head.backward_ms == 2.5);
    // Between and beyond the probes: a + c x b.
    for (const int64_t mbs : {1, 4, 16}) {
      const auto at = tune::times_at(fit, mbs);
      const auto want = synthetic(mbs);
      for (size_t i = 0; i < 3; ++i) check_piece(at.blocks[i], want.blocks[i]);
      check_piece(at.head, want.head);
      CHECK(tune::extrapolated(fit, mbs) == (mbs < 2 || mbs > 8));
    }
  }
}

TEST_CASE("a candidate at a probed micro batch size gets that probe's measured times exactly") {
  // Not on a line: the fit through them cannot reproduce them by arithmetic alone, so this checks the lookup.
  plan::LayerTimes lo, hi;
  lo.blocks = {{0.1, 0.7}, {0.3, 0.9}};
  hi.blocks = {{0.7, 2.3}, {1.1, 2.9}};
  lo.embedding = {0.01, 0.03};
  hi.embedding = {0.07, 0.11};
  lo.head = {1.3, 1.7};
  hi.head = {5.3, 6.1};
  const auto fit = tune::fit_affine(lo, 3, "lo", hi, 7, "hi");
  for (const auto& [mbs, want] : {std::pair{int64_t{3}, &lo}, std::pair{int64_t{7}, &hi}}) {
    const auto at = tune::times_at(fit, mbs);
    for (size_t i = 0; i < 2; ++i) check_piece(at.blocks[i], want->blocks[i]);
    check_piece(at.embedding, want->embedding);
    check_piece(at.head, want->head);
  }
  // candidate_times (what the search costs every candidate with) goes through the same lookup.
  tune::TuneOptions options;
  options.affine = fit;
  check_piece(tune::candidate_times(options, 7, 4).head, hi.head);
  check_piece(tune::candidate_times(options, 3, 4).blocks[1], lo.blocks[1]);
}

TEST_CASE("the search keeps to the probed micro batch sizes with a margin of x2") {
  const auto fit = tune::fit_affine(synthetic(3), 3, "lo", synthetic(7), 7, "hi");
  CHECK_FALSE(tune::searched(fit, 1));
  CHECK(tune::searched(fit, 2));   // 2 x 2 >= 3
  CHECK(tune::searched(fit, 5));
  CHECK(tune::searched(fit, 14));  // 7 x 2
  CHECK_FALSE(tune::searched(fit, 15));
}

TEST_CASE("the affine fit clamps a negative part to 0 and says which piece") {
  plan::LayerTimes lo, hi;
  lo.blocks = {{2.0, 1.0}};   // forward: faster at the larger batch (c < 0)
  hi.blocks = {{1.0, 9.0}};   // backward: 1 at mbs 1, 9 at mbs 2: a = -7 < 0
  const auto fit = tune::fit_affine(lo, 1, "lo", hi, 2, "hi");
  REQUIRE(fit.clamped.size() == 2);
  CHECK_THAT(fit.clamped[0], ContainsSubstring("block 0 forward") && ContainsSubstring("per-sequence part clamped"));
  CHECK_THAT(fit.clamped[1], ContainsSubstring("block 0 backward") && ContainsSubstring("fixed part clamped"));
  CHECK(fit.fixed.blocks[0].forward_ms == 1.5);
  CHECK(fit.per_sequence.blocks[0].forward_ms == 0.0);
  CHECK(fit.fixed.blocks[0].backward_ms == 0.0);
  CHECK(fit.per_sequence.blocks[0].backward_ms == 4.5);
  CHECK(tune::times_at(fit, 4).blocks[0].backward_ms == 18.0);
}

TEST_CASE("the affine fit refuses probes at one micro batch size or of different block counts") {
  const auto t = synthetic(4);
  CHECK_THROWS_AS(tune::fit_affine(t, 4, "a.json", t, 4, "b.json"), PlanError);
  CHECK_THROWS_WITH(tune::fit_affine(t, 4, "a.json", t, 4, "b.json"),
                    ContainsSubstring("a.json") && ContainsSubstring("two different positive micro batch sizes"));
  auto fewer = synthetic(1);
  fewer.blocks.pop_back();
  CHECK_THROWS_WITH(tune::fit_affine(t, 4, "a.json", fewer, 1, "b.json"),
                    ContainsSubstring("b.json has 2") && ContainsSubstring("same model"));
  CHECK_THROWS_AS(tune::fit_affine(t, 0, "a.json", fewer, 1, "b.json"), PlanError);
}
