// Tests for data::Dataset: windowing, targets, per-epoch permutation, determinism, held-out split,
// errors (over text sources), and the same over a blend of two token sources: proportions, held-out and
// dp disjointness, exact resume from a position.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"
#include "data/dataset.hpp"
#include "data/text_source.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using ppctl::data::Dataset;

namespace {

/// Writes `bytes` to `name` in this test's own folder (removed at exit) and checks the write.
std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  static const auto dir = ppctl::test::process_temp_dir("ppctl_data_tests_");
  const auto path = (dir / name).string();
  ppctl::test::write_checked(path, std::string(bytes.begin(), bytes.end()));
  return path;
}

// 8 windows of seq_len 4: window k covers bytes [4k, 4k+5); byte i has value i.
std::vector<uint8_t> counting_bytes(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i);
  return bytes;
}

/// A Dataset over one text source: the text format as a job with data.path reads it.
Dataset text_dataset(const std::vector<std::string>& files, int64_t seq_len, uint64_t seed,
                     double eval_fraction = 0.0) {
  std::vector<std::unique_ptr<ppctl::data::TokenSource>> sources;
  sources.push_back(std::make_unique<ppctl::data::TextSource>(files));
  return Dataset(std::move(sources), {1.0}, seq_len, seed, eval_fraction);
}

}  // namespace

TEST_CASE("windows are non-overlapping, targets are the next byte") {
  const auto path = write_file("count.txt", counting_bytes(33));
  const Dataset ds = text_dataset({path}, 4, 7);
  REQUIRE(ds.source(0).num_tokens() == 33);
  REQUIRE(ds.num_sequences() == 8);
  std::vector<int64_t> tokens(4), targets(4);
  for (int64_t i = 0; i < 8; ++i) {
    ds.sample(i, tokens.data(), targets.data());
    CHECK(tokens[0] % 4 == 0);
    for (int t = 0; t < 4; ++t) {
      CHECK(tokens[t] == tokens[0] + t);
      CHECK(targets[t] == tokens[t] + 1);
    }
  }
}

TEST_CASE("each epoch visits every window exactly once, in a new order") {
  const auto path = write_file("count2.txt", counting_bytes(129));
  const Dataset ds = text_dataset({path}, 4, 3);
  std::vector<int64_t> tokens(4), targets(4);
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t i = 0; i < 2 * ds.num_sequences(); ++i) {
    ds.sample(i, tokens.data(), targets.data());
    (i < ds.num_sequences() ? epoch0 : epoch1).push_back(tokens[0]);
  }
  const std::set<int64_t> starts0(epoch0.begin(), epoch0.end()), starts1(epoch1.begin(), epoch1.end());
  CHECK(starts0.size() == static_cast<size_t>(ds.num_sequences()));
  CHECK(starts0 == starts1);
  CHECK(epoch0 != epoch1);
}

TEST_CASE("the order depends on the seed only, and files are concatenated in order") {
  const auto a = write_file("a.txt", counting_bytes(100));
  const auto b = write_file("b.txt", counting_bytes(100));
  const Dataset one = text_dataset({a, b}, 8, 11), same = text_dataset({a, b}, 8, 11), other = text_dataset({a, b}, 8, 12);
  REQUIRE(one.source(0).num_tokens() == 200);
  REQUIRE(one.source(0).num_documents() == 2);
  std::vector<int64_t> t1(8), t2(8), t3(8), y(8);
  bool differs = false;
  for (int64_t i = 0; i < one.num_sequences(); ++i) {
    one.sample(i, t1.data(), y.data());
    same.sample(i, t2.data(), y.data());
    other.sample(i, t3.data(), y.data());
    CHECK(t1 == t2);
    differs = differs || t1 != t3;
  }
  CHECK(differs);
}

TEST_CASE("stream indices of a step are consecutive over microbatches and sequences") {
  CHECK(Dataset::stream_index(0, 0, 0, 4, 2) == 0);
  CHECK(Dataset::stream_index(0, 1, 0, 4, 2) == 2);
  CHECK(Dataset::stream_index(0, 3, 1, 4, 2) == 7);
  CHECK(Dataset::stream_index(1, 0, 0, 4, 2) == 8);
}

TEST_CASE("too little text or an unreadable file is a clear error") {
  const auto tiny = write_file("tiny.txt", counting_bytes(4));
  try {
    const Dataset ds = text_dataset({tiny}, 4, 0);
    FAIL("expected an error");
  } catch (const ppctl::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("4 tokens") != std::string::npos);
    CHECK(what.find("seq_len") != std::string::npos);
  }
  try {
    const Dataset ds = text_dataset({"/nonexistent/ppctl/data.txt"}, 4, 0);
    FAIL("expected an error");
  } catch (const ppctl::Error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/ppctl/data.txt") != std::string::npos);
  }
}

TEST_CASE("a data file gone or unreadable after validation names the spec, the field, the file and a fix") {
  // What a worker finds when a file the spec named was moved, deleted or made unreadable after the launcher
  // validated it (issue 12): the spec's data.path, or the blend entry, leads the message.
  const auto a = write_file("moved_a.txt", counting_bytes(64));
  const auto b = write_file("moved_b.txt", counting_bytes(64));
  for (const bool blend : {false, true}) {
    ppctl::config::JobSpec spec;
    spec.source = "/jobs/job.yaml";
    spec.model.seq_len = 4;
    ppctl::config::DataSource first, second;
    first.path = "moved_a.txt";
    first.files = {a};
    second.path = "moved_b.txt";
    second.files = {b};
    if (blend) {
      first.weight = second.weight = 0.5;
      spec.data.sources = {first, second};
    } else {
      spec.data.paths = {"moved_b.txt"};
      spec.data.sources = {second};
    }
    REQUIRE_NOTHROW(Dataset(spec));
    fs::rename(b, b + ".away");
    INFO("blend: " << blend);
    try {
      const Dataset ds(spec);
      FAIL("expected an error");
    } catch (const ppctl::DataError& e) {
      CHECK_THAT(std::string(e.what()),
                 Catch::Matchers::ContainsSubstring(std::string("/jobs/job.yaml: ") +
                                                    (blend ? "data.blend[1].path: " : "data.path: ") + b +
                                                    ": cannot be read: No such file or directory (fix: "));
    }
    fs::rename(b + ".away", b);
  }
}

TEST_CASE("data.eval_fraction holds out the last windows, never trained on, the same every time") {
  // 40 windows of seq_len 4 (161 bytes); byte i has value i mod 256, so a window's first token
  // names it (4k).
  const auto path = write_file("split.txt", counting_bytes(161));
  const double fraction = GENERATE(0.05, 0.1, 0.25, 0.5);
  INFO("eval_fraction " << fraction);
  const Dataset ds = text_dataset({path}, 4, 7, fraction);
  const int64_t held_out = ppctl::config::held_out_sequences(40, fraction);
  CHECK(held_out == static_cast<int64_t>(40 * fraction));
  CHECK(ds.num_eval_sequences() == held_out);
  CHECK(ds.num_sequences() + ds.num_eval_sequences() == 40);

  std::vector<int64_t> tokens(4), targets(4);
  std::set<int64_t> trained;
  for (int64_t i = 0; i < 3 * ds.num_sequences(); ++i) {  // three epochs
    ds.sample(i, tokens.data(), targets.data());
    trained.insert(tokens[0] / 4);
  }
  CHECK(static_cast<int64_t>(trained.size()) == ds.num_sequences());
  CHECK(*trained.rbegin() == ds.num_sequences() - 1);  // only windows before the held-out ones

  std::set<int64_t> evaluated;
  for (int64_t i = 0; i < 2 * held_out; ++i) {
    ds.eval_sample(i, tokens.data(), targets.data());
    evaluated.insert(tokens[0] / 4);
    CHECK(targets[0] == tokens[0] + 1);
    std::vector<int64_t> again(4), again_targets(4);
    ds.eval_sample(i, again.data(), again_targets.data());
    CHECK(again == tokens);  // deterministic, no shuffle state
  }
  CHECK(static_cast<int64_t>(evaluated.size()) == held_out);
  CHECK(*evaluated.begin() == ds.num_sequences());
}

TEST_CASE("without eval_fraction every window trains; a split leaving nothing to train is refused") {
  const auto path = write_file("tiny_split.txt", counting_bytes(9));  // 2 windows of seq_len 4
  CHECK(text_dataset({path}, 4, 7, 0.0).num_sequences() == 2);
  CHECK(text_dataset({path}, 4, 7, 0.0).num_eval_sequences() == 0);
  CHECK(text_dataset({path}, 4, 7, 0.5).num_sequences() == 1);
  const auto one_window = write_file("one_window.txt", counting_bytes(5));
  CHECK_THROWS_WITH(text_dataset({one_window}, 4, 7, 0.1),
                    Catch::Matchers::ContainsSubstring("leaving none to train on"));
}

TEST_CASE("a text spec trains on exactly the samples of the byte dataset before token formats") {
  // The order ppctl used until blends existed: Fisher-Yates from splitmix64 seeded with
  // seed x 0x100000001B3 + epoch + 1 over the windows, reimplemented here as the reference.
  const auto path = write_file("legacy.txt", counting_bytes(1001));
  const int64_t seq = 10;
  const uint64_t seed = 5;
  const Dataset ds = text_dataset({path}, seq, seed);
  const int64_t n = 100;
  REQUIRE(ds.num_sequences() == n);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) perm[static_cast<size_t>(k)] = k;
    uint64_t state = seed * 0x100000001B3ULL + static_cast<uint64_t>(epoch) + 1;
    for (int64_t k = n - 1; k > 0; --k) {
      const auto j = static_cast<int64_t>(ppctl::data::splitmix64(state) % static_cast<uint64_t>(k + 1));
      std::swap(perm[static_cast<size_t>(k)], perm[static_cast<size_t>(j)]);
    }
    for (int64_t k = 0; k < n; ++k) {
      CHECK(ds.train_window(epoch * n + k).window == perm[static_cast<size_t>(k)]);
    }
  }
}

TEST_CASE("large datasets are shuffled per index in bounded memory: still one permutation per epoch") {
  // Above kFisherYatesLimit windows the order is a Feistel permutation with cycle walking.
  const int64_t n = ppctl::data::WindowOrder::kFisherYatesLimit + 12'345;
  const ppctl::data::WindowOrder order(n, 9, 0);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    int64_t fixed_points = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t w = order.at(epoch * n + k);
      REQUIRE(w >= 0);
      REQUIRE(w < n);
      REQUIRE_FALSE(seen[static_cast<size_t>(w)]);
      seen[static_cast<size_t>(w)] = true;
      fixed_points += w == k ? 1 : 0;
    }
    CHECK(fixed_points < 100);  // a shuffle, not the identity
  }
  CHECK(order.at(0) != ppctl::data::WindowOrder(n, 10, 0).at(0));
  CHECK(order.at(0) != ppctl::data::WindowOrder(n, 9, 1).at(0));  // each dataset of a blend its own order
}

namespace {

/// A flat uint16 token file whose id at position k is `base + k` (mod 65536): a window's first input
/// token names the dataset (by its base) and the window.
std::string write_counting_tokens(const std::string& name, int64_t count, uint16_t base) {
  std::vector<uint8_t> bytes;
  for (int64_t k = 0; k < count; ++k) {
    const auto id = static_cast<uint16_t>(base + k);
    bytes.push_back(static_cast<uint8_t>(id & 0xff));
    bytes.push_back(static_cast<uint8_t>(id >> 8));
  }
  return write_file(name, bytes);
}

/// A blend of two flat token files of 401 and 201 tokens (seq_len 4: 100 and 50 windows), weights
/// 0.7 and 0.3; ids of A start at 0, of B at 30000.
Dataset two_dataset_blend(double eval_fraction, uint64_t seed = 3) {
  ppctl::config::JobSpec spec;
  spec.model.seq_len = 4;
  spec.train.seed = seed;
  spec.data.eval_fraction = eval_fraction;
  for (const auto& [weight, path] :
       {std::pair{0.7, write_counting_tokens("blend_a.bin", 401, 0)}, std::pair{0.3, write_counting_tokens("blend_b.bin", 201, 30000)}}) {
    ppctl::config::DataSource source;
    source.weight = weight;
    source.format = ppctl::config::DataFormat::Tokens;
    source.dtype = ppctl::config::TokenDType::Uint16;
    source.path = path;
    source.files = {path};
    spec.data.sources.push_back(source);
  }
  return Dataset(spec);
}

}  // namespace

TEST_CASE("a blend gives every dataset weight x N of any first N samples, give or take one") {
  const Dataset ds = two_dataset_blend(0.0);
  std::vector<int64_t> counts(2, 0);
  std::vector<int64_t> tokens(4), targets(4);
  for (int64_t n = 1; n <= 2000; ++n) {
    ds.sample(n - 1, tokens.data(), targets.data());
    const int64_t d = tokens[0] >= 30000 ? 1 : 0;
    CHECK(ds.train_window(n - 1).dataset == d);
    ++counts[static_cast<size_t>(d)];
    CHECK(std::abs(static_cast<double>(counts[0]) - 0.7 * static_cast<double>(n)) <= 1.0);
    CHECK(std::abs(static_cast<double>(counts[1]) - 0.3 * static_cast<double>(n)) <= 1.0);
    for (int t = 0; t < 4; ++t) CHECK(targets[t] == tokens[t] + 1);
  }
  // Three weights that do not divide evenly keep the same promise (the rule, not the data).
  ppctl::data::BlendCursor cursor({0.5, 0.3, 0.2});
  std::vector<int64_t> c(3, 0);
  for (int64_t n = 1; n <= 5000; ++n) {
    ++c[static_cast<size_t>(cursor.at(n - 1).dataset)];
    for (size_t d = 0; d < 3; ++d) CHECK(std::abs(static_cast<double>(c[d]) - cursor.weights()[d] * static_cast<double>(n)) <= 1.0);
  }
}

TEST_CASE("a blend's datasets each go through their own epochs, every window once per epoch") {
  const Dataset ds = two_dataset_blend(0.0);
  std::vector<std::vector<int64_t>> by_dataset(2);
  for (int64_t i = 0; i < 1000; ++i) {
    const auto w = ds.train_window(i);
    by_dataset[static_cast<size_t>(w.dataset)].push_back(w.window);
  }
  for (size_t d = 0; d < 2; ++d) {
    const int64_t n = ds.num_sequences(static_cast<int64_t>(d));
    REQUIRE(static_cast<int64_t>(by_dataset[d].size()) >= 2 * n);
    const std::set<int64_t> first(by_dataset[d].begin(), by_dataset[d].begin() + n);
    const std::set<int64_t> second(by_dataset[d].begin() + n, by_dataset[d].begin() + 2 * n);
    CHECK(static_cast<int64_t>(first.size()) == n);
    CHECK(first == second);
    CHECK(std::vector<int64_t>(by_dataset[d].begin(), by_dataset[d].begin() + n) !=
          std::vector<int64_t>(by_dataset[d].begin() + n, by_dataset[d].begin() + 2 * n));
  }
}

TEST_CASE("a blend's held-out windows are disjoint from its training windows, per dataset") {
  const Dataset ds = two_dataset_blend(0.1);
  CHECK(ds.num_sequences(0) == 90);
  CHECK(ds.num_eval_sequences(0) == 10);
  CHECK(ds.num_sequences(1) == 45);
  CHECK(ds.num_eval_sequences(1) == 5);
  std::vector<int64_t> tokens(4), targets(4);
  std::set<int64_t> trained, evaluated;
  for (int64_t i = 0; i < 600; ++i) {
    ds.sample(i, tokens.data(), targets.data());
    trained.insert(tokens[0]);
  }
  std::vector<int64_t> eval_counts(2, 0);
  for (int64_t i = 0; i < 100; ++i) {
    ds.eval_sample(i, tokens.data(), targets.data());
    evaluated.insert(tokens[0]);
    ++eval_counts[tokens[0] >= 30000 ? 1 : 0];
  }
  CHECK(static_cast<int64_t>(trained.size()) == 90 + 45);
  CHECK(static_cast<int64_t>(evaluated.size()) == 10 + 5);
  for (int64_t t : evaluated) CHECK(trained.count(t) == 0);
  CHECK(eval_counts[0] == 70);  // the held-out stream is blended with the same weights
}

TEST_CASE("dp replicas read disjoint samples that together are the one-process global batch") {
  const Dataset ds = two_dataset_blend(0.0);
  const int64_t m = 3, mbs = 2, replicas = 2;
  for (int64_t step = 0; step < 5; ++step) {
    std::set<int64_t> seen;
    std::vector<int64_t> single;
    for (int64_t j = 0; j < replicas * m; ++j) {
      for (int64_t i = 0; i < mbs; ++i) single.push_back(Dataset::stream_index(step, j, i, replicas * m, mbs));
    }
    std::vector<int64_t> union_of_replicas;
    for (int64_t r = 0; r < replicas; ++r) {
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t i = 0; i < mbs; ++i) {
          const int64_t index = Dataset::stream_index(step, r * m + j, i, replicas * m, mbs);
          CHECK(seen.insert(index).second);  // no sample twice within a step
          union_of_replicas.push_back(index);
        }
      }
    }
    CHECK(union_of_replicas == single);
  }
  // The samples themselves depend only on the index: reading in another order changes nothing.
  const Dataset forward = two_dataset_blend(0.0), backward = two_dataset_blend(0.0);
  std::vector<std::pair<int64_t, int64_t>> a, b;
  for (int64_t i = 0; i < 200; ++i) a.emplace_back(forward.train_window(i).dataset, forward.train_window(i).window);
  for (int64_t i = 199; i >= 0; --i) b.emplace_back(backward.train_window(i).dataset, backward.train_window(i).window);
  std::reverse(b.begin(), b.end());
  CHECK(a == b);
}

TEST_CASE("a blend resumed from a position continues exactly as an uninterrupted stream") {
  const Dataset whole = two_dataset_blend(0.0);
  for (const int64_t at : {int64_t{1}, int64_t{77}, int64_t{333}}) {
    Dataset resumed = two_dataset_blend(0.0);
    const auto position = ppctl::data::BlendCursor({0.7, 0.3}).position(at);
    CHECK(position.counts[0] + position.counts[1] == at);
    resumed.seek(position);
    std::vector<int64_t> t1(4), y1(4), t2(4), y2(4);
    for (int64_t i = at; i < at + 300; ++i) {
      whole.sample(i, t1.data(), y1.data());
      resumed.sample(i, t2.data(), y2.data());
      REQUIRE(t1 == t2);
      REQUIRE(y1 == y2);
    }
    CHECK(whole.position(at + 300).counts == resumed.position(at + 300).counts);
  }
}
