// data.path and blend paths: glob(3) expansion of text corpora, one absolute path for token formats.
#include "config/data_paths.hpp"

#include <fmt/format.h>
#include <glob.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "config/load.hpp"

namespace ppctl::config::detail {
namespace {

namespace fs = std::filesystem;

/// `pattern` with glob(3)'s special characters escaped, so a folder name like `runs[1]` matches itself.
std::string glob_escaped(const std::string& pattern) {
  std::string out;
  for (char ch : pattern) {
    if (std::strchr("*?[]\\", ch) != nullptr) out += '\\';
    out += ch;
  }
  return out;
}

/// Expands one data.path entry with glob(3): absolute and `~` entries as written, relative ones under
/// `base_dir`. Returns every match that is a regular file after following symlinks, as a normalised
/// absolute path; sets `only_dirs` when something matched but none of it was a regular file.
std::vector<std::string> expand_data_entry(const std::string& entry, const std::string& base_dir, bool& only_dirs) {
  const bool as_written = entry.front() == '/' || entry.front() == '~';
  const std::string pattern = as_written ? entry : glob_escaped(base_dir) + "/" + entry;
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), GLOB_TILDE, nullptr, &matches);
  std::vector<std::string> files;
  only_dirs = false;
  if (rc == 0) {
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
      struct stat info {};
      if (::stat(matches.gl_pathv[i], &info) != 0) continue;  // dangling symlink
      if (S_ISREG(info.st_mode)) {
        files.push_back(fs::path(matches.gl_pathv[i]).lexically_normal().string());
      } else if (S_ISDIR(info.st_mode)) {
        only_dirs = true;
      }
    }
    if (!files.empty()) only_dirs = false;
  }
  ::globfree(&matches);
  return files;
}

/// A `tokens` file or `megatron` prefix of `e`: one non-empty path (no glob), made absolute against
/// `base_dir`. Whether the files exist and hold a dataset is checked by data::check_data.
bool read_token_path(Context& c, const Entry& e, DataFormat format, std::string& out) {
  if (!e.value.IsScalar() || e.value.Scalar().empty()) {
    c.bad(e, fmt::format("must be one path with data.format {}", to_string(format)),
          format == DataFormat::Megatron ? "name the dataset's PREFIX (PREFIX.bin and PREFIX.idx), e.g. path: corpus/train_text_document"
                                         : "name the token file, e.g. path: corpus/train.bin");
    return false;
  }
  const std::string& text = e.value.Scalar();
  const fs::path p(text.front() == '~' && std::getenv("HOME") != nullptr ? std::getenv("HOME") + text.substr(1) : text);
  out = (p.is_absolute() ? p : fs::path(c.base_dir) / p).lexically_normal().string();
  return true;
}

/// Reports `e` (a list at `e.path`, or "data.blend's paths" together) holding `count` entries, more than `limit`.
void refuse_long_list(Context& c, const Entry& e, const std::string& what, std::size_t count, std::size_t limit,
                      const std::string& hint) {
  c.problems.add(e.line, e.path, std::nullopt,
                 fmt::format("{} {} entries, more than the {} that ppctl reads", what, count, limit), hint);
}

/// Data path entries of a blend entry (a mapping): 1 for one path, the list's length for a list.
std::size_t blend_item_paths(const YAML::Node& item) {
  if (!item.IsMap()) return 0;
  const YAML::Node path = item["path"];
  return path && path.IsSequence() ? path.size() : 1;
}

const char* const kFewerPathsHint =
    "match the files with globs (corpus/*.txt, shards/part-*.txt) instead of one entry per file";

}  // namespace

bool read_data_paths(Context& c, const Entry& e, std::vector<std::string>& paths, std::vector<std::string>& files_out) {
  std::vector<Entry> entries;
  if (e.value.IsScalar()) {
    entries.push_back(e);
  } else if (e.value.IsSequence() && e.value.size() > kMaxDataPaths) {
    refuse_long_list(c, e, "a list of", e.value.size(), kMaxDataPaths, kFewerPathsHint);
    return false;
  } else if (e.value.IsSequence() && e.value.size() > 0) {
    for (std::size_t i = 0; i < e.value.size(); ++i) {
      entries.push_back({fmt::format("{}[{}]", e.path, i), line_of(e.value[i]), e.value[i]});
    }
  } else {
    c.bad(e, "must be a path or glob, or a list of them", "write path: corpus/*.txt or path: [a.txt, b.txt]");
    return false;
  }
  bool ok = true;
  std::set<std::string> files;
  for (const Entry& entry : entries) {
    if (!entry.value.IsScalar() || entry.value.Scalar().empty()) {
      c.bad(entry, "must be a non-empty path or glob", "write a path such as corpus/*.txt");
      ok = false;
      continue;
    }
    const std::string& text = entry.value.Scalar();
    paths.push_back(text);
    bool only_dirs = false;
    const std::vector<std::string> matched = expand_data_entry(text, c.base_dir, only_dirs);
    if (matched.empty()) {
      const bool relative = text.front() != '/' && text.front() != '~';
      c.bad(entry, "matches no regular file",
            only_dirs  ? "it names only folders; name the files in them, e.g. " + text + "/*.txt"
            : relative ? "check the path; relative paths are resolved against " + c.base_dir
                       : std::string("check the path"));
      ok = false;
    }
    files.insert(matched.begin(), matched.end());
  }
  files_out.assign(files.begin(), files.end());
  return ok;
}

bool read_source_path(Context& c, const Entry& e, DataSource& source) {
  source.path = e.value.IsScalar() ? e.value.Scalar() : describe(e.value);
  if (source.format == DataFormat::Text) {
    std::vector<std::string> written;
    return read_data_paths(c, e, written, source.files);
  }
  std::string resolved;
  if (!read_token_path(c, e, source.format, resolved)) return false;
  source.files = {resolved};
  return true;
}

bool read_blend(Context& c, KeyWalk& walk, const Entry& e, DataSpec& data) {
  const std::string example = "blend: [{weight: 0.7, path: a/train}, {weight: 0.3, path: b/train}]";
  if (!e.value.IsSequence() || e.value.size() == 0) {
    c.bad(e, "must be a non-empty list of {weight, path} entries", "write " + example);
    return false;
  }
  if (e.value.size() > kMaxBlendEntries) {
    refuse_long_list(c, e, "a list of", e.value.size(), kMaxBlendEntries,
                     "merge the datasets of one source into one with `ppctl data prepare`, or give a text "
                     "source's files as one entry with a glob");
    return false;
  }
  std::size_t paths = 0;
  for (const auto& item : e.value) paths += blend_item_paths(item);
  if (paths > kMaxDataPaths) {
    refuse_long_list(c, e, "its entries' paths hold", paths, kMaxDataPaths, kFewerPathsHint);
    return false;
  }
  bool ok = true;
  double total = 0;
  std::vector<DataSource> sources;
  for (std::size_t i = 0; i < e.value.size(); ++i) {
    const Entry item{fmt::format("{}[{}]", e.path, i), line_of(e.value[i]), e.value[i]};
    if (!item.value.IsMap()) {
      c.bad(item, "must be a mapping {weight: W, path: P}", "write " + example);
      ok = false;
      continue;
    }
    DataSource source{0.0, data.format, data.dtype, "", {}};
    std::optional<Entry> path;
    bool item_ok = true;
    bool has_weight = false;
    walk.for_each_key(item.value, item.path, {"weight", "path", "format", "dtype"},
                      [&](const std::string& key, const Entry& field) {
                        bool field_ok = true;
                        if (key == "weight") {
                          has_weight = true;
                          field_ok = read_real(c, field, {0, true, 1e9, false}, 1.0, source.weight);
                        } else if (key == "path") {
                          path = field;
                        } else if (key == "format") {
                          field_ok = read_enum(
                              c, field, std::vector{DataFormat::Text, DataFormat::Tokens, DataFormat::Megatron}, {},
                              source.format);
                        } else {
                          field_ok = read_enum(
                              c, field, std::vector{TokenDType::Uint16, TokenDType::Uint32, TokenDType::Int32}, {},
                              source.dtype);
                        }
                        item_ok = item_ok && field_ok;
                        return field_ok;
                      });
    for (const auto& [missing, present] : {std::pair{"weight", has_weight}, std::pair{"path", path.has_value()}}) {
      if (present) continue;
      c.problems.add(item.line, item.path + "." + missing, std::nullopt, "required key is missing",
                     "write each entry as {weight: 0.5, path: corpus/train}");
      item_ok = false;
    }
    if (item_ok) item_ok = read_source_path(c, *path, source);
    if (item_ok) {
      total += source.weight;
      sources.push_back(std::move(source));
    }
    ok = ok && item_ok;
  }
  if (!ok) return false;
  for (auto& source : sources) source.weight /= total;
  data.sources = std::move(sources);
  return true;
}

}  // namespace ppctl::config::detail
