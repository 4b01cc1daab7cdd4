// Tests for data::TextDataset: windowing, targets, per-epoch permutation, determinism, errors.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "core/error.hpp"
#include "data/text_dataset.hpp"

namespace fs = std::filesystem;
using ppctl::data::TextDataset;

namespace {

std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const auto dir = fs::temp_directory_path() / "ppctl_data_tests";
  fs::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// 8 windows of seq_len 4: window k covers bytes [4k, 4k+5); byte i has value i.
std::vector<uint8_t> counting_bytes(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i);
  return bytes;
}

}  // namespace

TEST_CASE("windows are non-overlapping, targets are the next byte") {
  const auto path = write_file("count.txt", counting_bytes(33));
  TextDataset ds({path}, 4, 7);
  REQUIRE(ds.num_bytes() == 33);
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
  TextDataset ds({path}, 4, 3);
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
  TextDataset one({a, b}, 8, 11), same({a, b}, 8, 11), other({a, b}, 8, 12);
  REQUIRE(one.num_bytes() == 200);
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
  CHECK(TextDataset::stream_index(0, 0, 0, 4, 2) == 0);
  CHECK(TextDataset::stream_index(0, 1, 0, 4, 2) == 2);
  CHECK(TextDataset::stream_index(0, 3, 1, 4, 2) == 7);
  CHECK(TextDataset::stream_index(1, 0, 0, 4, 2) == 8);
}

TEST_CASE("too little text or an unreadable file is a clear error") {
  const auto tiny = write_file("tiny.txt", counting_bytes(4));
  try {
    TextDataset ds({tiny}, 4, 0);
    FAIL("expected an error");
  } catch (const ppctl::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("4 bytes") != std::string::npos);
    CHECK(what.find("seq_len") != std::string::npos);
  }
  try {
    TextDataset ds({"/nonexistent/ppctl/data.txt"}, 4, 0);
    FAIL("expected an error");
  } catch (const ppctl::Error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/ppctl/data.txt") != std::string::npos);
  }
}

TEST_CASE("data.eval_fraction holds out the last windows, never trained on, the same every time") {
  // 40 windows of seq_len 4 (161 bytes); byte i has value i mod 256, so a window's first token
  // names it (4k).
  const auto path = write_file("split.txt", counting_bytes(161));
  const double fraction = GENERATE(0.05, 0.1, 0.25, 0.5);
  INFO("eval_fraction " << fraction);
  TextDataset ds({path}, 4, 7, fraction);
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
  CHECK(TextDataset({path}, 4, 7, 0.0).num_sequences() == 2);
  CHECK(TextDataset({path}, 4, 7, 0.0).num_eval_sequences() == 0);
  CHECK(TextDataset({path}, 4, 7, 0.5).num_sequences() == 1);
  const auto one_window = write_file("one_window.txt", counting_bytes(5));
  CHECK_THROWS_WITH(TextDataset({one_window}, 4, 7, 0.1),
                    Catch::Matchers::ContainsSubstring("leaving none to train on"));
}
