// The safetensors reader and writer: round trip, fp16/bf16 widening, and every kind of header
// corruption the reader must refuse (each naming the file).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "interop/safetensors.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using ppctl::interop::SafetensorsFile;
using Catch::Matchers::ContainsSubstring;

namespace {

/// This test process's own folder (mkdtemp), removed at exit.
fs::path temp_dir() {
  static const auto dir = ppctl::test::process_temp_dir("ppctl-safetensors-");
  return dir;
}

/// A file of an 8-byte little-endian `length` (the header's by default), `header`, then `data`.
fs::path raw_file(const std::string& name, const std::string& header, const std::string& data,
                  std::optional<uint64_t> length = std::nullopt) {
  const auto path = temp_dir() / name;
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
  return path;
}

void require_refused(const fs::path& path, const std::string& why) {
  try {
    SafetensorsFile file(path);
    FAIL("accepted " << path);
  } catch (const ppctl::CheckpointError& e) {
    CHECK_THAT(e.what(), ContainsSubstring(path.string()));
    CHECK_THAT(e.what(), ContainsSubstring(why));
  }
}

}  // namespace

TEST_CASE("safetensors: written tensors read back, header 8-byte aligned", "[interop]") {
  const std::vector<float> a{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 1e-3f};
  const std::vector<float> b{42.0f};
  const auto path = temp_dir() / "roundtrip.safetensors";
  ppctl::interop::write_safetensors(path, {{"a.weight", {2, 3}, a.data()}, {"b", {1}, b.data()}},
                                    {{"format", "pt"}});
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  CHECK((8 + n) % 8 == 0);
  const SafetensorsFile file(path);
  REQUIRE(file.tensors().size() == 2);
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.find("a.weight")->shape == std::vector<int64_t>{2, 3});
  CHECK(file.read_f32("a.weight") == a);
  CHECK(file.read_f32("b") == b);
  CHECK(file.find("missing") == nullptr);
  CHECK_THROWS_AS(file.read_f32("missing"), ppctl::CheckpointError);
}

TEST_CASE("safetensors: empty tensors and scalars read as 0 and 1 values", "[interop]") {
  // fuzz_safetensors's first finding (its seed scalars.safetensors): memcpy into an empty vector's null
  // data(), undefined behaviour that UBSan reports (scripts/sanitize.sh, scripts/fuzz.sh)
  const std::string header = R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                             R"("h":{"dtype":"F16","shape":[2,0],"data_offsets":[0,0]},)"
                             R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})";
  const float value = 1.5f;
  const SafetensorsFile file(
      raw_file("empty.safetensors", header, std::string(reinterpret_cast<const char*>(&value), sizeof value)));
  CHECK(file.read_f32("a").empty());
  CHECK(file.read_f32("h").empty());
  CHECK(file.read_f32("s") == std::vector<float>{1.5f});
}

TEST_CASE("safetensors: F16 and BF16 widen exactly to fp32", "[interop]") {
  // 1.0, -2.0, 65504 (largest half), 2^-24 (smallest subnormal half), +inf
  const uint16_t half[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00};
  // 1.0, -2.5, 3.0e38-ish (0x7f61), smallest normal bf16 (0x0080)
  const uint16_t bf16[] = {0x3f80, 0xc020, 0x7f61, 0x0080};
  std::string data(reinterpret_cast<const char*>(half), sizeof half);
  data.append(reinterpret_cast<const char*>(bf16), sizeof bf16);
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[10,18]}})";
  const SafetensorsFile file(raw_file("half.safetensors", header, data));
  const auto h = file.read_f32("h");
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(std::isinf(h[4]));
  const auto b = file.read_f32("b");
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -2.5f);
  uint32_t bits = 0x7f610000u;
  float expected;
  std::memcpy(&expected, &bits, 4);
  CHECK(b[2] == expected);
  CHECK(b[3] == std::ldexp(1.0f, -126));
}

TEST_CASE("safetensors: corrupt headers and truncated files are refused, naming the file", "[interop]") {
  const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  require_refused(raw_file("zero-header.safetensors", "", eight, 0), "header length 0");
  {
    const auto path = temp_dir() / "tiny.safetensors";
    std::ofstream(path, std::ios::binary) << "abc";
    require_refused(path, "shorter than the 8-byte header length");
  }
  require_refused(raw_file("long-header.safetensors", ok, eight, 1'000'000), "reaches past the end");
  require_refused(raw_file("huge-header.safetensors", ok, eight, 200'000'000), "above the format's limit");
  require_refused(raw_file("not-json.safetensors", "{\"t\": [1, ", eight), "not valid JSON");
  require_refused(raw_file("not-object.safetensors", "{\"t\": 3}", eight), "is not a JSON object");
  require_refused(raw_file("dtype.safetensors", R"({"t":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", eight),
                  "unknown dtype 'F33'");
  require_refused(raw_file("shape.safetensors", R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
                  "sizes must be integers >= 0");
  require_refused(raw_file("offsets.safetensors", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
                  "needs 12 bytes");
  require_refused(raw_file("reversed.safetensors", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
                  "END is before BEGIN");
  require_refused(raw_file("no-offsets.safetensors", R"({"t":{"dtype":"F32","shape":[2]}})", eight),
                  "data_offsets");
  require_refused(
      raw_file("overlap.safetensors",
               R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               eight),
      "overlap or leave a hole");
  require_refused(raw_file("hole.safetensors", R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
                  "overlap or leave a hole");
  require_refused(raw_file("truncated.safetensors", ok, std::string(5, '\0')), "truncated");
  require_refused(raw_file("trailing.safetensors", ok, std::string(12, '\0')), "after the last tensor");
  require_refused(raw_file("metadata.safetensors",
                           R"({"__metadata__":{"k":1},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight),
                  "is not a string");
  CHECK_THROWS_AS(SafetensorsFile(temp_dir() / "absent.safetensors"), ppctl::CheckpointError);
  // The intact file is accepted (the checks above fail for their own reason).
  CHECK(SafetensorsFile(raw_file("intact.safetensors", ok, eight)).read_f32("t").size() == 2);
}

TEST_CASE("safetensors: names and bytes from a stranger's header reach the message escaped", "[interop]") {
  // Issue 25 item 7: a tensor named "\x1b]0;pwned\x07" (an escape sequence that retitles the terminal) was
  // printed as it is in the "truncated" error.
  const std::string eight(8, '\0');
  const std::string name = "\\u001b]0;pwned\\u0007";  // JSON for ESC ] 0 ; pwned BEL
  for (const auto& [file, header, data] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"escape-truncated.safetensors",
            R"({")" + name + R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(5, '\0')},
           {"escape-dtype.safetensors", R"({"t":{"dtype":")" + name + R"(","shape":[2],"data_offsets":[0,8]}})", eight},
           {"escape-field.safetensors", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],")" + name + R"(":1}})",
            eight},
           {"escape-json.safetensors", "{\"t\x1b[2J\": [1, ", eight},
       }) {
    INFO(file);
    try {
      SafetensorsFile opened(raw_file(file, header, data));
      FAIL("accepted");
    } catch (const ppctl::CheckpointError& e) {
      const std::string what = e.what();
      CHECK(what.find('\x1b') == std::string::npos);
      CHECK(what.find('\x07') == std::string::npos);
      // The JSON parser's own message names the control character (U+001B) without quoting it.
      if (file != "escape-json.safetensors") CHECK(what.find("\\x1b") != std::string::npos);
    }
  }
}
