// Tests for config/load's data section: data.path (required, globs, symlinks, resolved against the spec's
// folder), the text it must hold, and data.blend.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "support/load_helpers.hpp"

namespace fs = std::filesystem;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

// ------------------------------------------------------------------------------------------------------------
// Data paths.

TEST_CASE("data.path is required", "[config][data]") {
  const Message no_section = only_problem("# comment\nmodel:\n  layers: 2\n");
  check(no_section, 2, "data.path", std::nullopt, "required key is missing");
  CHECK(no_section.hint == "name the training text, e.g. data: {path: corpus/*.txt}");

  const auto problems = problems_of("model: {layers: 2}\ndata:\n  paths: corpus.txt\n");
  REQUIRE(problems.size() == 2);
  check(split(problems[0]), 2, "data.path", std::nullopt, "required key is missing");
  check(split(problems[1]), 3, "data.paths", std::nullopt, "unknown key");
  CHECK(split(problems[1]).hint == "did you mean 'path'?");
}

TEST_CASE("data.path must be a path or a non-empty list of paths", "[config][data]") {
  const std::string value = GENERATE("[]", "", "{}");
  const Message m = only_problem("data:\n  path: " + value + "\n");
  CHECK(m.line == 2);
  CHECK(m.path == "data.path");
  CHECK(m.rule == "must be a path or glob, or a list of them");

  const Message element = only_problem("data:\n  path:\n    - corpus.txt\n    - [x]\n");
  check(element, 4, "data.path[1]", "[x]", "must be a non-empty path or glob");
}

TEST_CASE("a data entry that matches nothing is named", "[config][data]") {
  const TempDir dir;
  dir.write("a.txt");
  const auto problems = problems_of("data:\n  path:\n    - a.txt\n    - missing/*.txt\n    - nope.txt\n", dir.str());
  REQUIRE(problems.size() == 2);
  const Message first = split(problems[0]);
  check(first, 4, "data.path[1]", "\"missing/*.txt\"", "matches no regular file");
  CHECK(first.hint == "check the path; relative paths are resolved against " + dir.str());
  check(split(problems[1]), 5, "data.path[2]", "\"nope.txt\"", "matches no regular file");

  check(only_problem("data: {path: '*.csv'}\n", dir.str()), 1, "data.path", "\"*.csv\"", "matches no regular file");

  const std::string absolute = (dir.path() / "absent" / "*.txt").string();
  const Message absolute_entry = only_problem("data: {path: '" + absolute + "'}\n", dir.str());
  check(absolute_entry, 1, "data.path", "\"" + absolute + "\"", "matches no regular file");
  CHECK(absolute_entry.hint == "check the path");
}

TEST_CASE("the data must hold at least one sequence of seq_len + 1 bytes", "[config][data]") {
  const TempDir dir;
  dir.write("a.txt", "12345");
  dir.write("b.txt", "678");
  const Message short_text = only_problem("model: {seq_len: 8}\ndata: {path: '*.txt'}\n", dir.str());
  check(short_text, 2, "data.path", "2 file(s), 8 bytes", "must hold at least model.seq_len + 1 = 9 bytes of text");
  CHECK(short_text.hint == "add text, or lower model.seq_len to 7 or less");
  // Exactly seq_len + 1 bytes over both files is enough.
  CHECK_NOTHROW(parse_job_spec("model: {seq_len: 7}\ndata: {path: '*.txt'}\n", "job.yaml", dir.str()));
  // Empty files: the rule is still stated, with nothing to lower seq_len to.
  dir.write("c/empty.txt", "");
  check(only_problem("data: {path: c/empty.txt}\n", dir.str()), 1, "data.path", "1 file(s), 0 bytes",
        "must hold at least model.seq_len + 1 = 129 bytes of text");
}

TEST_CASE("data globs skip directories and follow symlinks", "[config][data]") {
  const TempDir dir;
  const fs::path real = dir.write("real.txt");
  fs::create_directories(dir.path() / "folder.txt");
  fs::create_symlink(real, dir.path() / "link.txt");
  fs::create_symlink(dir.path() / "gone", dir.path() / "dangling.txt");
  fs::create_symlink(dir.path() / "folder.txt", dir.path() / "dirlink.txt");

  const JobSpec spec = parse_ok("data: {path: '*.txt'}\n", dir.str());
  CHECK(spec.data.files == std::vector<std::string>{(dir.path() / "link.txt").string(), real.string()});

  const Message only_dirs = only_problem("data: {path: folder.txt}\n", dir.str());
  check(only_dirs, 1, "data.path", "\"folder.txt\"", "matches no regular file");
  CHECK(only_dirs.hint == "it names only folders; name the files in them, e.g. folder.txt/*.txt");

  check(only_problem("data: {path: dangling.txt}\n", dir.str()), 1, "data.path", "\"dangling.txt\"",
        "matches no regular file");
}

TEST_CASE("data files are absolute, sorted and unique", "[config][data]") {
  const TempDir dir;
  const fs::path a = dir.write("a.txt");
  const fs::path b = dir.write("b.txt");
  const fs::path c = dir.write("sub/c.txt");
  const JobSpec spec =
      parse_ok("data:\n  path: [sub/c.txt, '*.txt', ./a.txt, sub/../b.txt, " + a.string() + "]\n", dir.str());
  CHECK(spec.data.files == std::vector<std::string>{a.string(), b.string(), c.string()});
  CHECK(spec.data.paths.size() == 5);
  CHECK(spec.data.paths[1] == "*.txt");
}

TEST_CASE("relative data paths are resolved against base_dir, not the working directory", "[config][data]") {
  const TempDir dir;
  const fs::path file = dir.write("specs/corpus/x.txt");
  const JobSpec spec = parse_ok("data: {path: 'corpus/*.txt'}\n", (dir.path() / "specs").string());
  CHECK(spec.data.files == std::vector<std::string>{file.string()});

  // The same spec from another folder finds nothing: the working directory plays no part.
  check(only_problem("data: {path: 'corpus/*.txt'}\n", dir.str()), 1, "data.path", "\"corpus/*.txt\"",
        "matches no regular file");
}

TEST_CASE("glob characters in base_dir match only themselves", "[config][data]") {
  const TempDir dir;
  const fs::path file = dir.write("run[1]/x.txt");
  dir.write("run1/y.txt");  // what `run[1]` would match as a pattern
  const JobSpec spec = parse_ok("data: {path: '*.txt'}\n", (dir.path() / "run[1]").string());
  CHECK(spec.data.files == std::vector<std::string>{file.string()});
}

// ------------------------------------------------------------------------------------------------------------
// Blends.

TEST_CASE("data.blend: weights normalised, format and dtype per entry or from data.*", "[config][data]") {
  const JobSpec spec = parse_ok(
      "model: {vocab_size: 300}\ndata:\n  format: megatron\n  blend:\n    - {weight: 3, path: a/train}\n"
      "    - {weight: 1, path: corpus.txt, format: text}\n");
  REQUIRE(spec.data.sources.size() == 2);
  CHECK(spec.data.sources[0].weight == 0.75);
  CHECK(spec.data.sources[0].format == ppctl::config::DataFormat::Megatron);
  CHECK(spec.data.sources[0].files == std::vector<std::string>{corpus_dir().str() + "/a/train"});
  CHECK(spec.data.sources[1].weight == 0.25);
  CHECK(spec.data.sources[1].format == ppctl::config::DataFormat::Text);
  CHECK(spec.data.sources[1].files == std::vector<std::string>{corpus_dir().str() + "/corpus.txt"});
  // A text entry in the blend keeps the byte rule for vocab_size.
  CHECK(only_problem("model: {vocab_size: 100}\ndata: {blend: [{weight: 1, path: corpus.txt, format: text}]}\n").path ==
        "model.vocab_size");
}

TEST_CASE("data.blend and data.format mistakes are reported with the entry", "[config][data]") {
  const Message both = only_problem("data: {path: corpus.txt, blend: [{weight: 1, path: corpus.txt}]}\n");
  check(both, 1, "data.blend", std::nullopt, "data.path and data.blend exclude each other");
  const Message weight = only_problem("data: {format: tokens, blend: [{weight: 0, path: x.bin}]}\n");
  check(weight, 1, "data.blend[0].weight", "0", "must be in (0, 1000000000]");
  const Message missing = only_problem("data: {format: tokens, blend: [{path: x.bin}]}\n");
  check(missing, 1, "data.blend[0].weight", std::nullopt, "required key is missing");
  const Message unknown = only_problem("data: {format: tokens, blend: [{weight: 1, path: x.bin, wieght: 2}]}\n");
  CHECK(unknown.path == "data.blend[0].wieght");
  const Message format = only_problem("data: {format: indexed, path: corpus.txt}\n");
  check(format, 1, "data.format", "\"indexed\"", "must be one of text, tokens, megatron");
  CHECK(format.hint == "did you mean 'megatron'?");
  const Message dtype = only_problem("data: {format: tokens, dtype: int16, path: x.bin}\n");
  check(dtype, 1, "data.dtype", "\"int16\"", "must be one of uint16, uint32, int32");
  const Message empty = only_problem("data: {blend: []}\n");
  check(empty, 1, "data.blend", "[]", "must be a non-empty list of {weight, path} entries");
}
