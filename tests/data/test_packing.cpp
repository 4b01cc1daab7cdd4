// Tests for data::pack_documents (best-fit decreasing packing, the overlong rules) and data::PackedCorpus (a chat
// dataset's windows: targets shifted within a conversation, masks, positions restarting, documents, padding,
// held-out packs, and its refusals), over Megatron indexed datasets written here.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "core/bad_input.hpp"
#include "data/dataset.hpp"
#include "data/megatron_format.hpp"
#include "data/packed_corpus.hpp"
#include "data/packing.hpp"
#include "support/temp_dir.hpp"

namespace megatron = ppctl::data::megatron;
using ppctl::config::Overlong;
using ppctl::data::PackedCorpus;
using ppctl::data::pack_documents;
using Catch::Matchers::ContainsSubstring;

namespace {

/// Windows first-fit decreasing opens for `lengths` (each at most `capacity`): the bound best fit must meet.
size_t first_fit_decreasing_windows(std::vector<int64_t> lengths, int64_t capacity) {
  std::sort(lengths.rbegin(), lengths.rend());
  std::vector<int64_t> free;
  for (const int64_t n : lengths) {
    if (n == 0) continue;
    auto it = std::find_if(free.begin(), free.end(), [n](int64_t f) { return f >= n; });
    if (it == free.end()) {
      free.push_back(capacity - n);
    } else {
      *it -= n;
    }
  }
  return free.size();
}

/// Writes the Megatron dataset PREFIX.{bin,idx} of uint16 `sequences` (one document each) and, with `masks`,
/// PREFIX.loss_mask.{bin,idx} of uint8 masks (same lengths unless a test wants them otherwise).
void write_chat_dataset(const std::string& prefix, const std::vector<std::vector<uint16_t>>& sequences,
                        const std::vector<std::vector<uint8_t>>& masks) {
  std::string bin;
  std::vector<int64_t> lengths, documents{0};
  for (const auto& s : sequences) {
    bin.append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint16_t));
    lengths.push_back(static_cast<int64_t>(s.size()));
    documents.push_back(static_cast<int64_t>(lengths.size()));
  }
  ppctl::test::write_checked(prefix + ".bin", bin);
  ppctl::test::write_checked(prefix + ".idx", megatron::encode_index(megatron::DType::kUint16, lengths, documents));
  std::string mask_bin;
  std::vector<int64_t> mask_lengths, mask_documents{0};
  for (const auto& m : masks) {
    mask_bin.append(reinterpret_cast<const char*>(m.data()), m.size());
    mask_lengths.push_back(static_cast<int64_t>(m.size()));
    mask_documents.push_back(static_cast<int64_t>(mask_lengths.size()));
  }
  const auto mask_prefix = ppctl::data::loss_mask_prefix(prefix);
  ppctl::test::write_checked(mask_prefix + ".bin", mask_bin);
  ppctl::test::write_checked(mask_prefix + ".idx",
                             megatron::encode_index(megatron::DType::kUint8, mask_lengths, mask_documents));
}

/// Conversation d of length lengths[d]: token j is 1000 d + j; its mask marks the second half as targets.
struct Corpus {
  std::vector<std::vector<uint16_t>> tokens;
  std::vector<std::vector<uint8_t>> masks;
};
Corpus conversations(const std::vector<int64_t>& lengths) {
  Corpus c;
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<uint16_t> tokens;
    std::vector<uint8_t> mask;
    for (int64_t j = 0; j < lengths[d]; ++j) {
      tokens.push_back(static_cast<uint16_t>(1000 * d + static_cast<size_t>(j)));
      mask.push_back(j >= lengths[d] / 2 ? 1 : 0);
    }
    c.tokens.push_back(tokens);
    c.masks.push_back(mask);
  }
  return c;
}

/// Every field of window `w` of `corpus`.
struct Window {
  std::vector<int64_t> tokens, targets, positions, documents;
  std::vector<float> mask;
};
Window read_window(const PackedCorpus& corpus, int64_t w) {
  const auto s = static_cast<size_t>(corpus.seq_len());
  Window out{std::vector<int64_t>(s), std::vector<int64_t>(s), std::vector<int64_t>(s), std::vector<int64_t>(s),
             std::vector<float>(s)};
  corpus.read(w, {out.tokens.data(), out.targets.data(), out.mask.data(), out.positions.data(), out.documents.data()});
  return out;
}

}  // namespace

TEST_CASE("best-fit decreasing places every conversation once, within the window, in no more windows than FFD") {
  std::mt19937_64 rng(GENERATE(1, 2, 3, 4, 5));
  const int64_t capacity = 64;
  std::vector<int64_t> lengths(300);
  for (auto& n : lengths) n = std::uniform_int_distribution<int64_t>(0, capacity)(rng);
  const auto packing = pack_documents(lengths, capacity, Overlong::Drop);
  std::vector<int> seen(lengths.size(), 0);
  int64_t placed = 0;
  for (const auto& pack : packing.packs) {
    int64_t tokens = 0;
    for (const auto& piece : pack.pieces) {
      ++seen[static_cast<size_t>(piece.document)];
      CHECK(piece.length == lengths[static_cast<size_t>(piece.document)]);
      tokens += piece.length;
    }
    CHECK(tokens == pack.tokens);
    CHECK(tokens <= capacity);
    placed += tokens;
  }
  for (size_t d = 0; d < lengths.size(); ++d) CHECK(seen[d] == (lengths[d] == 0 ? 0 : 1));
  CHECK(placed == packing.packed_tokens);
  CHECK(packing.empty == std::count(lengths.begin(), lengths.end(), 0));
  CHECK(packing.packs.size() <= first_fit_decreasing_windows(lengths, capacity));
  // the same input packs the same way
  const auto again = pack_documents(lengths, capacity, Overlong::Drop);
  REQUIRE(again.packs.size() == packing.packs.size());
  for (size_t w = 0; w < again.packs.size(); ++w) {
    CHECK(again.packs[w].pieces.size() == packing.packs[w].pieces.size());
    CHECK(again.packs[w].pieces.front().document == packing.packs[w].pieces.front().document);
  }
}

TEST_CASE("an exact fill is one full window; efficiency counts the padding") {
  const auto exact = pack_documents({3, 5, 8}, 8, Overlong::Error);
  REQUIRE(exact.packs.size() == 2);  // 8 | 5 + 3
  CHECK(exact.efficiency(8) == 1.0);
  const auto loose = pack_documents({5, 5}, 8, Overlong::Error);
  CHECK(loose.packs.size() == 2);
  CHECK(loose.efficiency(8) == 10.0 / 16.0);
}

TEST_CASE("overlong conversations are dropped or truncated, and counted") {
  const std::vector<int64_t> lengths{4, 12, 9, 3};
  const auto dropped = pack_documents(lengths, 8, Overlong::Drop);
  CHECK(dropped.dropped == 2);
  CHECK(dropped.truncated == 0);
  CHECK(dropped.packed_tokens == 7);
  const auto truncated = pack_documents(lengths, 8, Overlong::Truncate);
  CHECK(truncated.dropped == 0);
  CHECK(truncated.truncated == 2);
  CHECK(truncated.packed_tokens == 8 + 8 + 4 + 3);
}

TEST_CASE("a chat window: targets within each conversation, masks shifted with them, positions restarting, padding") {
  const ppctl::test::TempDir dir("ppctl_packing_tests_");
  const auto prefix = (dir.path / "chat").string();
  const auto c = conversations({5, 3, 1, 6});  // capacity 8: [6, 1] and [5, 3] (best fit)
  write_chat_dataset(prefix, c.tokens, c.masks);
  REQUIRE(ppctl::data::has_loss_masks(prefix));
  const PackedCorpus corpus(prefix, 8, 0.0, Overlong::Error);
  REQUIRE(corpus.train_windows() == 2);
  REQUIRE(corpus.eval_windows() == 0);
  int64_t targets = 0;
  std::map<int64_t, int> tokens_seen;
  for (int64_t w = 0; w < 2; ++w) {
    const auto win = read_window(corpus, w);
    int64_t counted = 0;
    for (size_t i = 0; i < 8; ++i) {
      if (win.documents[i] < 0) {  // padding: masked, token 0, after every conversation
        CHECK(win.mask[i] == 0.0F);
        CHECK(win.tokens[i] == 0);
        continue;
      }
      const int64_t d = win.tokens[i] / 1000, j = win.tokens[i] % 1000;
      ++tokens_seen[win.tokens[i]];
      CHECK(win.positions[i] == j);  // restarts at every conversation
      const auto n = static_cast<int64_t>(c.tokens[static_cast<size_t>(d)].size());
      if (j + 1 < n) {
        CHECK(win.targets[i] == win.tokens[i] + 1);  // the next token of the same conversation
        CHECK(win.mask[i] == static_cast<float>(c.masks[static_cast<size_t>(d)][static_cast<size_t>(j + 1)]));
      } else {
        CHECK(win.mask[i] == 0.0F);  // the last token predicts no other conversation's first
      }
      if (i + 1 < 8 && win.documents[i + 1] >= 0 && win.documents[i + 1] != win.documents[i]) {
        CHECK(win.positions[i + 1] == 0);
      }
      counted += win.mask[i] != 0.0F ? 1 : 0;
    }
    CHECK(corpus.targets(w) == counted);
    targets += counted;
  }
  CHECK(tokens_seen.size() == 15);  // every token of every conversation, once
  // targets: each conversation's masked half, less nothing (its first token is never a target here)
  int64_t expected = 0;
  for (const auto& m : c.masks) expected += std::count(m.begin() + 1, m.end(), 1);
  CHECK(targets == expected);
}

TEST_CASE("a one-token conversation has no target; a window of such adds nothing") {
  const ppctl::test::TempDir dir("ppctl_packing_tests_");
  const auto prefix = (dir.path / "one").string();
  write_chat_dataset(prefix, {{7}, {8}, {9}}, {{1}, {1}, {1}});
  const PackedCorpus corpus(prefix, 4, 0.0, Overlong::Error);
  REQUIRE(corpus.train_windows() == 1);
  CHECK(corpus.targets(0) == 0);
  const auto win = read_window(corpus, 0);
  CHECK(win.documents == std::vector<int64_t>{0, 1, 2, -1});
  CHECK(win.positions[0] == 0);
  CHECK(win.positions[1] == 0);
}

TEST_CASE("held-out conversations are packed apart, after the training windows") {
  const ppctl::test::TempDir dir("ppctl_packing_tests_");
  const auto prefix = (dir.path / "split").string();
  const auto c = conversations({4, 4, 4, 4, 4, 4, 4, 4, 4, 4});
  write_chat_dataset(prefix, c.tokens, c.masks);
  const PackedCorpus corpus(prefix, 8, 0.2, Overlong::Error);  // the last 2 conversations held out
  CHECK(corpus.train_windows() == 4);
  REQUIRE(corpus.eval_windows() == 1);
  const auto held_out = read_window(corpus, 4);
  std::vector<int64_t> docs{held_out.tokens[0] / 1000, held_out.tokens[4] / 1000};
  std::sort(docs.begin(), docs.end());
  CHECK(docs == std::vector<int64_t>{8, 9});
  // through Dataset: the held-out sample reads that window, training samples never do
  ppctl::data::Dataset dataset(std::make_unique<PackedCorpus>(prefix, 8, 0.2, Overlong::Error), 3);
  CHECK(dataset.packed());
  std::vector<int64_t> tokens(8), targets(8);
  for (int64_t i = 0; i < 8; ++i) {
    dataset.sample(i, tokens.data(), targets.data());
    CHECK(tokens[0] / 1000 < 8);
  }
  dataset.eval_sample(0, tokens.data(), targets.data());
  CHECK(tokens[0] / 1000 >= 8);
  CHECK(dataset.sample_targets(0) == 4);  // two conversations of 4 tokens: positions 1 and 2 predict targets
}

TEST_CASE("a chat dataset is refused with the conversation, the files and the fix") {
  const ppctl::test::TempDir dir("ppctl_packing_tests_");
  const auto prefix = (dir.path / "bad").string();
  SECTION("overlong under data.overlong: error") {
    const auto c = conversations({4, 9, 12});
    write_chat_dataset(prefix, c.tokens, c.masks);
    REQUIRE_THROWS_AS(PackedCorpus(prefix, 8, 0.0, Overlong::Error), ppctl::DataError);
    REQUIRE_THROWS_WITH(PackedCorpus(prefix, 8, 0.0, Overlong::Error),
                        ContainsSubstring("conversation 2 (1-based") && ContainsSubstring("9 tokens") &&
                            ContainsSubstring("2 of 3 conversations") && ContainsSubstring("data.overlong: drop") &&
                            ContainsSubstring("raise model.seq_len, to 12 to fit them all where the model"));
    CHECK(PackedCorpus(prefix, 8, 0.0, Overlong::Drop).train_packing().dropped == 2);
  }
  SECTION("masks of other lengths") {
    auto c = conversations({4, 5});
    c.masks[1].pop_back();
    write_chat_dataset(prefix, c.tokens, c.masks);
    REQUIRE_THROWS_WITH(PackedCorpus(prefix, 8, 0.0, Overlong::Error),
                        ContainsSubstring("conversation 2 (1-based) has 5 tokens, but its loss mask") &&
                            ContainsSubstring("loss_mask") && ContainsSubstring("prepare the dataset again"));
  }
  SECTION("a different number of masks") {
    auto c = conversations({4, 5});
    c.masks.pop_back();
    write_chat_dataset(prefix, c.tokens, c.masks);
    REQUIRE_THROWS_WITH(PackedCorpus(prefix, 8, 0.0, Overlong::Error),
                        ContainsSubstring("2 sequences, but its loss masks") && ContainsSubstring("hold 1"));
  }
  SECTION("nothing left to train on") {
    const auto c = conversations({9, 10});
    write_chat_dataset(prefix, c.tokens, c.masks);
    REQUIRE_THROWS_WITH(PackedCorpus(prefix, 8, 0.0, Overlong::Drop),
                        ContainsSubstring("no conversation to train on") && ContainsSubstring("2 conversation(s)") &&
                            ContainsSubstring("data.overlong: truncate"));
  }
}

TEST_CASE("a checkpoint's description of a chat source names its size and overlong rule: others are not resumed") {
  const ppctl::test::TempDir dir("ppctl_packing_tests_");
  const auto prefix = (dir.path / "described").string();
  const auto c = conversations({4, 5});
  write_chat_dataset(prefix, c.tokens, c.masks);
  ppctl::config::JobSpec spec;
  ppctl::config::DataSource source;
  source.format = ppctl::config::DataFormat::Megatron;
  source.path = prefix;
  source.files = {prefix};
  spec.data.sources = {source};
  spec.data.overlong = Overlong::Drop;
  const auto drop = ppctl::data::describe_sources(spec);
  REQUIRE(drop.size() == 1);
  CHECK_THAT(drop[0], ContainsSubstring("megatron - 1") && ContainsSubstring("chat conversations=2 tokens=9") &&
                         ContainsSubstring("overlong=drop"));
  spec.data.overlong = Overlong::Truncate;
  CHECK(ppctl::data::describe_sources(spec) != drop);
  spec.data.overlong = Overlong::Drop;  // another chat dataset under the same rule
  const auto other = (dir.path / "other").string();
  const auto more = conversations({4, 5, 3});
  write_chat_dataset(other, more.tokens, more.masks);
  spec.data.sources[0].files = {other};
  CHECK(ppctl::data::describe_sources(spec) != drop);
  spec.data.sources[0].files = {(dir.path / "plain").string()};  // no masks beside it: a token stream
  CHECK(ppctl::data::describe_sources(spec)[0] == "megatron - 1");
}
