// Tests for data::check_data, the launcher's data checks: every kind of bad input is one problem line
// naming the spec, the field and the file; token ids are scanned once and the scan cached.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/load.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/check_data.hpp"
#include "data/flat_token_source.hpp"
#include "data/megatron_format.hpp"
#include "support/temp_dir.hpp"
#include "support/unreadable.hpp"

namespace fs = std::filesystem;
namespace megatron = ppctl::data::megatron;
using Catch::Matchers::ContainsSubstring;

namespace {

void write_bytes(const fs::path& path, const std::string& bytes) {
  ppctl::test::write_checked(path, bytes);  // a failed write fails the test, not a later read
}

/// DIR/ds.bin + DIR/ds.idx: `tokens` uint16 ids 0, 1, 2, ... (mod 50) in one document, with id
/// `bad_id` at position `bad_at` when given.
std::string write_dataset(const fs::path& dir, int64_t tokens, int64_t bad_at = -1, uint16_t bad_id = 0) {
  std::vector<uint16_t> ids(static_cast<size_t>(tokens));
  for (int64_t k = 0; k < tokens; ++k) ids[static_cast<size_t>(k)] = static_cast<uint16_t>(k % 50);
  if (bad_at >= 0) ids[static_cast<size_t>(bad_at)] = bad_id;
  write_bytes(dir / "ds.bin", std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  write_bytes(dir / "ds.idx", megatron::encode_index(megatron::DType::kUint16, {tokens}, {0, 1}));
  return (dir / "ds").string();
}

ppctl::config::JobSpec spec_for(const fs::path& dir, const std::string& data_yaml, int64_t vocab = 64) {
  const std::string yaml = "model: {vocab_size: " + std::to_string(vocab) +
                           ", layers: 1, hidden: 8, heads: 1, seq_len: 8}\ndata: " + data_yaml + "\n";
  return ppctl::config::parse_job_spec(yaml, "job.yaml", dir.string());
}

/// The problems check_data reports, joined by newlines (empty when it accepts the spec).
std::string problems_of(const ppctl::config::JobSpec& spec) {
  try {
    ppctl::data::check_data(spec);
  } catch (const ppctl::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a sound megatron dataset passes, and its scan is cached beside the .bin") {
  ppctl::test::TempDir dir;
  write_dataset(dir.path, 100);
  const auto spec = spec_for(dir.path, "{format: megatron, path: ds}");
  CHECK(problems_of(spec).empty());
  REQUIRE(fs::exists(dir.path / "ds.bin.ppctl-ids.json"));
  // The cache is used while the file keeps its size and mtime: a forged cache is believed...
  write_bytes(dir.path / "ds.bin.ppctl-ids.json",
              std::string("{\"format\": \"ppctl-id-scan\", \"version\": 2, \"source\": \"") +
                  (dir.path / "ds").string() + " (megatron, uint16)\", \"size\": 200, \"mtime_ns\": " +
                  std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     fs::last_write_time(dir.path / "ds.bin").time_since_epoch())
                                     .count()) +
                  ", \"tokens\": 100, \"min_token_id\": 0, \"max_token_id\": 1000}");
  const std::string forged = problems_of(spec);
  // ...and leads only to the exact rescan for the position, which finds no bad id: accepted.
  CHECK(forged.empty());
}

TEST_CASE("a token id at or above model.vocab_size is refused with the file and its position") {
  ppctl::test::TempDir dir;
  write_dataset(dir.path, 100, 37, 64);
  const std::string what = problems_of(spec_for(dir.path, "{format: megatron, path: ds}"));
  CHECK_THAT(what, ContainsSubstring("job.yaml: model.vocab_size: " + (dir.path / "ds.bin").string()));
  CHECK_THAT(what, ContainsSubstring("the id 64 at token position 37 (sequence 0, its token 37)"));
  CHECK_THAT(what, ContainsSubstring("set model.vocab_size above the largest id (64): 65"));
  CHECK(problems_of(spec_for(dir.path, "{format: megatron, path: ds}", 65)).empty());
  // A negative id in an int32 token file.
  std::vector<int32_t> ids(50, 3);
  ids[20] = -1;
  write_bytes(dir.path / "neg.bin", std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 4));
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: tokens, dtype: int32, path: neg.bin}")),
             ContainsSubstring("the id -1 at token position 20"));
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: tokens, dtype: int32, path: neg.bin}")),
             ContainsSubstring("check data.dtype"));
}

TEST_CASE("a scan cache or tokenizer sidecar made for other data is not trusted") {
  ppctl::test::TempDir dir;
  // Ids 0..999 as uint16; the same bytes read as uint32 hold ids of 65536 and more.
  std::vector<uint16_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint16_t>(i);
  write_bytes(dir.path / "t.bin", std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  CHECK(problems_of(spec_for(dir.path, "{format: tokens, dtype: uint16, path: t.bin}", 1000)).empty());
  REQUIRE(fs::exists(dir.path / "t.bin.ppctl-ids.json"));
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: tokens, dtype: uint32, path: t.bin}", 1000)),
             ContainsSubstring("at token position 0"));
  // A .bin replaced under an old sidecar (other token count, sidecar older): its max_token_id is ignored.
  write_dataset(dir.path, 100, 10, 500);
  write_bytes(dir.path / "ds.tokenizer.json",
              R"({"format": "ppctl-tokenizer", "version": 1, "tokenizer": "bytes", "model": null,
                  "vocab_size": 64, "eod_id": null, "max_token_id": 10, "documents": 1, "tokens": 90})");
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: megatron, path: ds}")),
             ContainsSubstring("the id 500 at token position 10"));
  write_bytes(dir.path / "ds.tokenizer.json",
              R"({"format": "ppctl-tokenizer", "version": 1, "tokenizer": "bytes", "model": null,
                  "vocab_size": 64, "eod_id": null, "max_token_id": 10, "documents": 1, "tokens": 100})");
  fs::last_write_time(dir.path / "ds.tokenizer.json",
                      fs::last_write_time(dir.path / "ds.bin") - std::chrono::hours(1));
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: megatron, path: ds}")),
             ContainsSubstring("the id 500 at token position 10"));
}

TEST_CASE("model.vocab_size below the tokenizer sidecar's vocabulary is refused") {
  ppctl::test::TempDir dir;
  write_dataset(dir.path, 100);
  write_bytes(dir.path / "ds.tokenizer.json",
              R"({"format": "ppctl-tokenizer", "version": 1, "tokenizer": "sentencepiece", "model": null,
                  "vocab_size": 1000, "eod_id": null, "max_token_id": 49, "documents": 1, "tokens": 100})");
  const std::string what = problems_of(spec_for(dir.path, "{format: megatron, path: ds}"));
  CHECK_THAT(what, ContainsSubstring("job.yaml: model.vocab_size: 64 is smaller than the vocabulary"));
  CHECK_THAT(what, ContainsSubstring("(1000 ids"));
  CHECK(problems_of(spec_for(dir.path, "{format: megatron, path: ds}", 1000)).empty());
  CHECK_FALSE(fs::exists(dir.path / "ds.bin.ppctl-ids.json"));  // the sidecar's max_token_id: no scan
}

TEST_CASE("missing, unreadable, mismatched and damaged datasets are refused naming field and file") {
  ppctl::test::TempDir dir;
  const auto prefix = write_dataset(dir.path, 100);
  const auto spec = spec_for(dir.path, "{format: megatron, path: ds}");
  fs::remove(prefix + ".idx");
  CHECK_THAT(problems_of(spec), ContainsSubstring("job.yaml: data.path: " + prefix + ".idx: cannot be read"));
  fs::create_directory(prefix + ".idx");
  CHECK_THAT(problems_of(spec), ContainsSubstring("job.yaml: data.path: " + prefix + ".idx"));
  fs::remove(prefix + ".idx");
  write_dataset(dir.path, 100);
  fs::remove(prefix + ".bin");
  CHECK_THAT(problems_of(spec), ContainsSubstring(prefix + ".bin: cannot be read"));
  write_dataset(dir.path, 100);
  write_bytes(prefix + ".bin", std::string(150, '\0'));
  CHECK_THAT(problems_of(spec), ContainsSubstring("the index does not match " + prefix + ".bin"));
  write_dataset(dir.path, 100);
  std::string idx = megatron::encode_index(megatron::DType::kUint16, {100}, {0, 1});
  idx[3] = 'x';
  write_bytes(prefix + ".idx", idx);
  CHECK_THAT(problems_of(spec), ContainsSubstring(prefix + ".idx: bad magic"));
  idx = megatron::encode_index(megatron::DType::kUint16, {100}, {0, 1});
  idx[9] = 3;
  write_bytes(prefix + ".idx", idx);
  CHECK_THAT(problems_of(spec), ContainsSubstring(prefix + ".idx: index version 3"));
  idx = megatron::encode_index(megatron::DType::kUint16, {100}, {0, 1});
  idx[17] = 0;
  write_bytes(prefix + ".idx", idx);
  CHECK_THAT(problems_of(spec), ContainsSubstring(prefix + ".idx: unknown dtype code 0"));
  // A document index that does not end at the sequence count.
  idx = megatron::encode_index(megatron::DType::kUint16, {60, 40}, {0, 1, 2});
  const int64_t wrong = 1;
  std::memcpy(idx.data() + 34 + 2 * 12 + 2 * 8, &wrong, 8);
  write_bytes(prefix + ".idx", idx);
  CHECK_THAT(problems_of(spec), ContainsSubstring(prefix + ".idx: document-index entry 2 is 1"));
}

TEST_CASE("a dataset too small for one training window after the held-out split is refused") {
  ppctl::test::TempDir dir;
  write_dataset(dir.path, 8);  // seq_len 8 needs 9 tokens
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: megatron, path: ds}")),
             ContainsSubstring("holds 8 tokens: 0 window(s) of model.seq_len + 1 = 9 tokens"));
  write_dataset(dir.path, 16);  // one window, held out by eval_fraction
  CHECK_THAT(problems_of(spec_for(dir.path, "{format: megatron, path: ds, eval_fraction: 0.1}")),
             ContainsSubstring("1 held out by data.eval_fraction 0.1, leaving none to train on"));
}

TEST_CASE("a blend names the entry whose dataset is bad; a token file names data.dtype") {
  ppctl::test::TempDir dir;
  write_dataset(dir.path, 100);
  write_bytes(dir.path / "odd.bin", std::string(101, '\0'));
  const auto spec = spec_for(dir.path,
                             "{blend: [{weight: 2, path: ds, format: megatron}, {weight: 1, path: odd.bin, "
                             "format: tokens}, {weight: 1, path: gone, format: megatron}]}");
  REQUIRE(spec.data.sources.size() == 3);
  CHECK(spec.data.sources[0].weight == 0.5);
  const std::string what = problems_of(spec);
  CHECK_THAT(what, ContainsSubstring("job.yaml: data.blend[1].path: " + (dir.path / "odd.bin").string() +
                                     ": 101 bytes is not a whole number of 2-byte uint16 ids (fix: check data.dtype"));
  CHECK_THAT(what, ContainsSubstring("job.yaml: data.blend[2].path: " + (dir.path / "gone").string() + ".idx"));
  CHECK(what.find("data.blend[0]") == std::string::npos);
}

TEST_CASE("a damaged or hand-edited id-scan cache is ignored and the file scanned again (fuzz finding)") {
  ppctl::test::TempDir dir;
  const auto path = (dir.path / "t.bin").string();
  write_bytes(path, std::string("\x01\x00\x07\x00\x03\x00", 6));  // uint16 ids 1 7 3
  const ppctl::data::FlatTokenSource source(path, ppctl::config::TokenDType::Uint16);
  const auto good = ppctl::data::scan_ids(source, path);
  CHECK((good.min_id == 1 && good.max_id == 7 && good.tokens == 3));
  const std::string cache = path + ".ppctl-ids.json";
  const std::string matching = ppctl::core::read_file(cache);
  // The cache's key still matches (size, mtime, source, tokens) but its values are damaged: missing, of
  // another type, fractional, out of order; or the file holds no object at all.
  const auto edit = [&](const std::string& from, const std::string& to) {
    auto text = matching;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  for (const std::string& damaged :
       {edit("\"min_token_id\"", "\"min_poken_id\""), edit("\"max_token_id\": 7", "\"max_token_id\": \"7\""),
        edit("\"max_token_id\": 7", "\"max_token_id\": 1e30"), edit("\"min_token_id\": 1", "\"min_token_id\": 9"),
        std::string("[1, 2, 3]"), std::string("\"ppctl-id-scan\"")}) {
    INFO(damaged);
    write_bytes(cache, damaged);
    const auto range = ppctl::data::scan_ids(source, path);
    CHECK((range.min_id == 1 && range.max_id == 7 && range.tokens == 3));
  }
}

TEST_CASE("index sizes from damaged header counts do not overflow (fuzz finding)") {
  megatron::IndexHeader header;
  header.sequence_count = 0x8700000000000002ULL;  // the fuzz input's count: 12 x count overflowed int64
  CHECK(megatron::index_file_bytes(header) == INT64_MAX);
  header.sequence_count = 2;
  header.document_count = UINT64_MAX;
  CHECK(megatron::index_file_bytes(header) == INT64_MAX);
  header.document_count = 3;
  CHECK(megatron::index_file_bytes(header) == 34 + 2 * 12 + 3 * 8);
}

TEST_CASE("a file the data section names that cannot be read is refused before anything starts") {
  // Issue 12, fault 6: each data file of each format, and the tokenizer sidecar, unreadable in turn.
  ppctl::test::TempDir dir;
  const auto prefix = write_dataset(dir.path, 100);
  write_bytes(dir.path / "flat.bin", std::string(200, '\0'));  // 100 uint16 ids 0
  write_bytes(dir.path / "text.txt", std::string(400, 'a'));
  struct Case {
    std::string data, file;
  };
  for (const auto& c : {Case{"{path: text.txt}", "text.txt"}, Case{"{format: tokens, path: flat.bin}", "flat.bin"},
                        Case{"{format: megatron, path: ds}", "ds.bin"}, Case{"{format: megatron, path: ds}", "ds.idx"}}) {
    INFO(c.data << ", " << c.file << " unreadable");
    const auto spec = spec_for(dir.path, c.data, 256);  // 256: text holds bytes
    REQUIRE(problems_of(spec).empty());  // readable: accepted
    const ppctl::test::Unreadable unreadable(dir.path / c.file);
    const auto problems = problems_of(spec);
    CHECK_THAT(problems, ContainsSubstring("job.yaml: data.path: " + (dir.path / c.file).string() +
                                           ": cannot be read: Permission denied"));
  }
  // The sidecar `ppctl data prepare` writes, which model.vocab_size is checked against.
  write_bytes(prefix + ".tokenizer.json", "{\"format\": \"ppctl-tokenizer\", \"vocab_size\": 50}");
  const auto spec = spec_for(dir.path, "{format: megatron, path: ds}");
  REQUIRE(problems_of(spec).empty());
  const ppctl::test::Unreadable unreadable(prefix + ".tokenizer.json");
  CHECK_THAT(problems_of(spec), ContainsSubstring("job.yaml: data.path: " + prefix +
                                                  ".tokenizer.json: cannot be read: Permission denied"));
}
