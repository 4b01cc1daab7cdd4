// Tests for the token sources (text, tokens, megatron) and the .idx layout: ids read back, lengths,
// documents, and each kind of bad file refused with its name.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/flat_token_source.hpp"
#include "data/megatron_format.hpp"
#include "data/megatron_source.hpp"
#include "data/text_source.hpp"
#include "support/temp_dir.hpp"

namespace megatron = ppctl::data::megatron;
using Catch::Matchers::ContainsSubstring;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  ppctl::test::write_checked(path, bytes);  // a failed write fails the test, not a later read
}

template <typename T>
std::string as_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

/// PREFIX.bin + PREFIX.idx of int32 documents (one sequence each), as Megatron's builder writes them.
std::string write_megatron(const std::string& prefix, const std::vector<std::vector<int32_t>>& docs) {
  std::vector<int32_t> all;
  std::vector<int64_t> lengths, doc_index{0};
  for (const auto& d : docs) {
    all.insert(all.end(), d.begin(), d.end());
    lengths.push_back(static_cast<int64_t>(d.size()));
    doc_index.push_back(static_cast<int64_t>(lengths.size()));
  }
  write_bytes(prefix + ".bin", as_bytes(all));
  write_bytes(prefix + ".idx", megatron::encode_index(megatron::DType::kInt32, lengths, doc_index));
  return prefix;
}

std::vector<int64_t> read_all(const ppctl::data::TokenSource& s) {
  std::vector<int64_t> out(static_cast<size_t>(s.num_tokens()));
  s.read(0, s.num_tokens(), out.data());
  return out;
}

}  // namespace

TEST_CASE("the .idx header is Megatron's: magic, version 1, dtype codes, 34 bytes before the arrays") {
  CHECK(megatron::kIndexMagic == std::string_view("MMIDIDX\0\0", 9));
  CHECK(*megatron::dtype_from_code(8) == megatron::DType::kUint16);
  CHECK(*megatron::dtype_from_code(4) == megatron::DType::kInt32);
  CHECK_FALSE(megatron::dtype_from_code(0));
  CHECK_FALSE(megatron::dtype_from_code(9));
  CHECK(megatron::dtype_size(megatron::DType::kUint16) == 2);
  CHECK(megatron::dtype_size(megatron::DType::kInt64) == 8);
  CHECK(*megatron::dtype_from_name("int32") == megatron::DType::kInt32);
  CHECK(megatron::optimal_dtype(32000) == megatron::DType::kUint16);
  CHECK(megatron::optimal_dtype(128256) == megatron::DType::kInt32);
  const std::string idx = megatron::encode_index(megatron::DType::kUint16, {3, 0, 5}, {0, 1, 2, 3});
  CHECK(static_cast<int64_t>(idx.size()) == 34 + 3 * 12 + 4 * 8);
  const auto header = megatron::parse_index_header(idx, "x.idx");
  CHECK(header.dtype == megatron::DType::kUint16);
  CHECK(header.sequence_count == 3);
  CHECK(header.document_count == 4);
  CHECK(megatron::index_file_bytes(header) == static_cast<int64_t>(idx.size()));
}

TEST_CASE("a bad .idx header is refused naming the file: magic, version, dtype code, truncation") {
  std::string idx = megatron::encode_index(megatron::DType::kInt32, {2}, {0, 1});
  std::string bad_magic = idx;
  bad_magic[0] = 'X';
  CHECK_THROWS_WITH(megatron::parse_index_header(bad_magic, "a.idx"), ContainsSubstring("a.idx: bad magic"));
  std::string bad_version = idx;
  bad_version[9] = 2;
  CHECK_THROWS_WITH(megatron::parse_index_header(bad_version, "a.idx"), ContainsSubstring("version 2"));
  std::string bad_dtype = idx;
  bad_dtype[17] = 42;
  CHECK_THROWS_WITH(megatron::parse_index_header(bad_dtype, "a.idx"), ContainsSubstring("unknown dtype code 42"));
  CHECK_THROWS_WITH(megatron::parse_index_header(idx.substr(0, 20), "a.idx"), ContainsSubstring("shorter than"));
}

TEST_CASE("a megatron dataset reads as its documents back to back, empty documents included") {
  ppctl::test::TempDir dir;
  const auto prefix = write_megatron((dir.path / "ds").string(), {{5, 6, 7}, {}, {70000, 1}, {9}});
  ppctl::data::MegatronSource source(prefix);
  source.check_index();
  CHECK(source.num_tokens() == 6);
  CHECK(source.num_documents() == 4);
  CHECK(read_all(source) == std::vector<int64_t>{5, 6, 7, 70000, 1, 9});
  CHECK(source.sequence_length(1) == 0);
  CHECK(source.sequence_start(2) == 3);
  std::vector<int64_t> window(2);
  source.read(2, 2, window.data());
  CHECK(window == std::vector<int64_t>{7, 70000});
}

TEST_CASE("a megatron dataset with a missing, unreadable or mismatched file is refused naming it") {
  ppctl::test::TempDir dir;
  const auto prefix = write_megatron((dir.path / "ds").string(), {{1, 2, 3}, {4}});
  std::filesystem::rename(prefix + ".bin", prefix + ".moved");
  CHECK_THROWS_WITH(ppctl::data::MegatronSource(prefix), ContainsSubstring(prefix + ".bin: cannot be read"));
  std::filesystem::rename(prefix + ".moved", prefix + ".bin");
  std::filesystem::rename(prefix + ".idx", prefix + ".moved");
  CHECK_THROWS_WITH(ppctl::data::MegatronSource(prefix), ContainsSubstring(prefix + ".idx: cannot be read"));
  std::filesystem::create_directory(prefix + ".idx");  // unreadable as a file
  CHECK_THROWS_WITH(ppctl::data::MegatronSource(prefix), ContainsSubstring(prefix + ".idx"));
  std::filesystem::remove(prefix + ".idx");
  std::filesystem::rename(prefix + ".moved", prefix + ".idx");
  write_bytes(prefix + ".bin", as_bytes(std::vector<int32_t>{1, 2, 3}));  // one token short
  CHECK_THROWS_WITH(ppctl::data::MegatronSource(prefix), ContainsSubstring("the index does not match"));
  // Pointers that skip bytes: the .bin size matches the last entry, the full check finds the gap.
  write_bytes(prefix + ".bin", as_bytes(std::vector<int32_t>{1, 2, 3, 0, 4}));
  std::string idx = megatron::encode_index(megatron::DType::kInt32, {3, 1}, {0, 1, 2});
  const int64_t pointer = 16;  // sequence 1 starts at byte 16 instead of 12
  std::memcpy(idx.data() + 34 + 2 * 4 + 8, &pointer, 8);
  write_bytes(prefix + ".idx", idx);
  ppctl::data::MegatronSource gap(prefix);
  CHECK_THROWS_WITH(gap.check_index(), ContainsSubstring("sequence 1 has length 1 and byte pointer 16"));
  // A float dtype holds no ids.
  write_bytes(prefix + ".idx", megatron::encode_index(megatron::DType::kFloat32, {5}, {0, 1}));
  CHECK_THROWS_WITH(ppctl::data::MegatronSource(prefix), ContainsSubstring("dtype float32 holds no token ids"));
  // Truncated index arrays.
  write_bytes(prefix + ".idx", megatron::encode_index(megatron::DType::kInt32, {3, 1}, {0, 1, 2}).substr(0, 50));
  CHECK_THROWS_WITH(ppctl::data::MegatronSource(prefix), ContainsSubstring("truncated or damaged"));
}

TEST_CASE("a flat token file reads little-endian ids of its dtype; a size off the dtype is refused") {
  ppctl::test::TempDir dir;
  const auto path = (dir.path / "train.bin").string();
  write_bytes(path, as_bytes(std::vector<uint16_t>{1, 65535, 300}));
  CHECK(read_all(ppctl::data::FlatTokenSource(path, ppctl::config::TokenDType::Uint16)) ==
        std::vector<int64_t>{1, 65535, 300});
  write_bytes(path, as_bytes(std::vector<uint32_t>{4000000000U, 7}));
  CHECK(read_all(ppctl::data::FlatTokenSource(path, ppctl::config::TokenDType::Uint32)) ==
        std::vector<int64_t>{4000000000LL, 7});
  CHECK(read_all(ppctl::data::FlatTokenSource(path, ppctl::config::TokenDType::Int32)) ==
        std::vector<int64_t>{-294967296LL, 7});
  write_bytes(path, std::string(5, '\1'));
  CHECK_THROWS_WITH(ppctl::data::FlatTokenSource(path, ppctl::config::TokenDType::Uint16),
                    ContainsSubstring(path + ": 5 bytes is not a whole number of 2-byte uint16 ids"));
}

TEST_CASE("text files read as bytes across file boundaries, one document each") {
  ppctl::test::TempDir dir;
  const auto a = (dir.path / "a.txt").string(), b = (dir.path / "b.txt").string(), e = (dir.path / "e.txt").string();
  write_bytes(a, "ab");
  write_bytes(e, "");
  write_bytes(b, "cde");
  const ppctl::data::TextSource source({a, e, b});
  CHECK(source.num_tokens() == 5);
  CHECK(source.num_documents() == 3);
  std::vector<int64_t> window(3);
  source.read(1, 3, window.data());
  CHECK(window == std::vector<int64_t>{'b', 'c', 'd'});
}

TEST_CASE("a dataset path from a stranger reaches the message escaped: a file name with an escape sequence") {
  // Issue 25 item 7: file names come from whoever made the dataset; ESC in one must not act on the terminal.
  ppctl::test::TempDir dir;
  const std::string name = "ds\x1b]0;pwned\x07";
  const auto shown = (dir.path / "ds\\x1b]0;pwned\\x07").string();
  const auto check_escaped = [&](const std::string& what) {
    INFO(what);
    CHECK(what.find('\x1b') == std::string::npos);
    CHECK(what.find('\x07') == std::string::npos);
    CHECK(what.find(shown) != std::string::npos);
  };
  const auto prefix = write_megatron((dir.path / name).string(), {{1, 2, 3}, {4}});
  write_bytes(prefix + ".idx", "not an index at all, but long enough to hold the 34-byte header");
  try {
    ppctl::data::MegatronSource source(prefix);
    FAIL("accepted");
  } catch (const ppctl::Error& e) {
    check_escaped(e.what());
  }
  write_bytes(prefix + ".bin", std::string(5, '\1'));
  try {
    ppctl::data::FlatTokenSource source(prefix + ".bin", ppctl::config::TokenDType::Uint16);
    FAIL("accepted");
  } catch (const ppctl::Error& e) {
    check_escaped(e.what());
  }
  try {
    ppctl::data::FlatTokenSource source(prefix + ".missing", ppctl::config::TokenDType::Uint16);
    FAIL("accepted");
  } catch (const ppctl::Error& e) {
    check_escaped(e.what());
  }
}
