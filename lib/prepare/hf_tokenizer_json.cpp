// Reading a Hugging Face tokenizer.json (byte-level BPE) into HfTokenizerSpec; refusing what it does
// not implement, naming the file and the field.
#include "prepare/hf_tokenizer_json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "core/echo.hpp"
#include "prepare/document_reader.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kSupported =
    "ppctl reads byte-level BPE tokenizer.json files, as GPT-2, Llama 3 and Qwen2/3 ship them";

/// Errors that name the file and the field; every value from the file is echoed escaped.
class Fields {
 public:
  explicit Fields(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem, const std::string& fix) const {
    throw PrepareError(fmt::format("{}: {}: {} (fix: {})", core::echo_label(path_), field, problem, fix));
  }

  /// obj[key] when obj is an object holding it, else nullptr.
  static const json* find(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  /// The `type` of the object at `field` (it must be an object with a string type).
  std::string type_of(const json& obj, const std::string& field) const {
    const json* t = find(obj, "type");
    if (t == nullptr || !t->is_string()) fail(field, "an object with a string \"type\" is expected", kSupported);
    return t->get<std::string>();
  }

  /// obj[key] as a bool: absent or null is `absent`.
  bool flag(const json& obj, const char* key, const std::string& field, bool absent) const {
    const json* v = find(obj, key);
    if (v == nullptr || v->is_null()) return absent;
    if (!v->is_boolean()) fail(field + "." + key, "not true or false: " + core::echo_value(v->dump()), "write true or false");
    return v->get<bool>();
  }

  std::string string_at(const json& obj, const char* key, const std::string& field) const {
    const json* v = find(obj, key);
    if (v == nullptr || !v->is_string()) fail(field + "." + key, "a string is expected", "write the token as a string");
    return v->get<std::string>();
  }

  int32_t id_of(const json& v, const std::string& field) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fail(field, "not a token id: " + core::echo_value(v.dump()), "ids are integers in [0, 2^31)");
    }
    return static_cast<int32_t>(v.get<int64_t>());
  }

  [[noreturn]] void unsupported(const std::string& field, const std::string& what) const {
    fail(field, fmt::format("{} is not supported", core::echo_value(what)), kSupported);
  }

 private:
  const std::string& path_;
};

bool nfc_normalizer(const Fields& f, const json& n) {
  if (n.is_null()) return false;
  const std::string type = f.type_of(n, "normalizer");
  if (type == "NFC") return true;
  if (type == "Sequence") {
    const json* list = Fields::find(n, "normalizers");
    if (list != nullptr && list->is_array() && list->empty()) return false;
    if (list != nullptr && list->is_array() && list->size() == 1 &&
        f.type_of(list->at(0), "normalizer.normalizers[0]") == "NFC") {
      return true;
    }
    f.fail("normalizer.normalizers", "only an empty Sequence or one holding NFC is supported", kSupported);
  }
  f.unsupported("normalizer.type", "normalizer " + type);
}

HfSplitBehavior split_behavior(const Fields& f, const json& step, const std::string& field) {
  const std::string b = f.string_at(step, "behavior", field);
  if (b == "Removed") return HfSplitBehavior::kRemoved;
  if (b == "Isolated") return HfSplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return HfSplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return HfSplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return HfSplitBehavior::kContiguous;
  f.unsupported(field + ".behavior", b);
}

HfPreTokenizerStep pre_tokenizer_step(const Fields& f, const json& step, const std::string& field) {
  HfPreTokenizerStep s;
  s.field = field;
  const std::string type = f.type_of(step, field);
  if (type == "ByteLevel") {
    s.kind = HfPreTokenizerStep::Kind::kByteLevel;
    s.add_prefix_space = f.flag(step, "add_prefix_space", field, true);
    s.use_regex = f.flag(step, "use_regex", field, true);
    return s;
  }
  if (type != "Split") f.unsupported(field + ".type", "pre-tokenizer " + type);
  const json* pattern = Fields::find(step, "pattern");
  const json* regex = pattern != nullptr ? Fields::find(*pattern, "Regex") : nullptr;
  const json* literal = pattern != nullptr ? Fields::find(*pattern, "String") : nullptr;
  if ((regex == nullptr) == (literal == nullptr) || !(regex != nullptr ? *regex : *literal).is_string()) {
    f.fail(field + ".pattern", "{\"Regex\": ...} or {\"String\": ...} is expected", "write the split pattern");
  }
  s.pattern_is_regex = regex != nullptr;
  s.pattern = (regex != nullptr ? *regex : *literal).get<std::string>();
  s.behavior = split_behavior(f, step, field);
  s.invert = f.flag(step, "invert", field, false);
  return s;
}

/// Split steps then one ByteLevel: the byte-to-unicode mapping must come last, on whole pieces.
std::vector<HfPreTokenizerStep> pre_tokenizer(const Fields& f, const json& p) {
  std::vector<HfPreTokenizerStep> steps;
  if (p.is_null()) f.fail("pre_tokenizer", "null: no ByteLevel step", kSupported);
  if (f.type_of(p, "pre_tokenizer") == "Sequence") {
    const json* list = Fields::find(p, "pretokenizers");
    if (list == nullptr || !list->is_array()) f.fail("pre_tokenizer.pretokenizers", "a list is expected", kSupported);
    for (size_t i = 0; i < list->size(); ++i) {
      steps.push_back(pre_tokenizer_step(f, list->at(i), fmt::format("pre_tokenizer.pretokenizers[{}]", i)));
    }
  } else {
    steps.push_back(pre_tokenizer_step(f, p, "pre_tokenizer"));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool byte_level = steps[i].kind == HfPreTokenizerStep::Kind::kByteLevel;
    if (byte_level != (i + 1 == steps.size())) {
      f.fail(steps[i].field, byte_level ? "a ByteLevel step before other steps" : "no ByteLevel step last",
             std::string(kSupported) + ": Split steps, then ByteLevel");
    }
  }
  return steps;
}

HfBpeModel bpe_model(const Fields& f, const json& m) {
  const std::string type = f.type_of(m, "model");
  if (type != "BPE") f.unsupported("model.type", type + " (only BPE)");
  HfBpeModel model;
  if (const json* d = Fields::find(m, "dropout"); d != nullptr && !d->is_null() && !(d->is_number() && d->get<double>() == 0.0)) {
    f.unsupported("model.dropout", d->dump() + " (random merges; only null)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = Fields::find(m, key); v != nullptr && !v->is_null() && !(v->is_string() && v->get<std::string>().empty())) {
      f.unsupported(std::string("model.") + key, v->dump() + " (only null)");
    }
  }
  if (f.flag(m, "byte_fallback", "model", false)) f.unsupported("model.byte_fallback", "true");
  model.fuse_unk = f.flag(m, "fuse_unk", "model", false);
  model.ignore_merges = f.flag(m, "ignore_merges", "model", false);
  if (const json* u = Fields::find(m, "unk_token"); u != nullptr && !u->is_null()) {
    if (!u->is_string()) f.fail("model.unk_token", "a string or null is expected", "write the token");
    model.unk_token = u->get<std::string>();
  }
  const json* vocab = Fields::find(m, "vocab");
  if (vocab == nullptr || !vocab->is_object() || vocab->empty()) {
    f.fail("model.vocab", "a non-empty object of token: id is expected", "save the tokenizer with `tokenizers`");
  }
  model.vocab.reserve(vocab->size());
  std::unordered_map<int32_t, std::string> token_of_id;
  for (const auto& [token, id] : vocab->items()) {
    model.vocab.emplace_back(token, f.id_of(id, "model.vocab." + core::echo_value(token)));
    // Two strings with one id would make that id decode to either: the file is broken.
    const auto [seen, fresh] = token_of_id.emplace(model.vocab.back().second, token);
    if (!fresh) {
      f.fail("model.vocab." + core::echo_value(token),
             fmt::format("id {} is also the id of {}: two tokens cannot share an id", seen->first,
                         core::echo_value(seen->second)),
             "give every token of model.vocab its own id (save the tokenizer with `tokenizers` again)");
    }
  }
  const json* merges = Fields::find(m, "merges");
  if (merges == nullptr || !merges->is_array()) f.fail("model.merges", "a list is expected", "save the tokenizer with `tokenizers`");
  model.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& merge = merges->at(i);
    if (merge.is_string()) {  // "a b", the spelling before tokenizers 0.20
      const std::string& line = merge.get_ref<const std::string&>();
      const auto space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        f.fail(fmt::format("model.merges[{}]", i), "not two tokens separated by one space: " + core::echo_value(line),
               "write \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"]");
      }
      model.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      model.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      f.fail(fmt::format("model.merges[{}]", i), "not a pair of tokens: " + core::echo_value(merge.dump()),
             "write \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"]");
    }
  }
  return model;
}

std::vector<HfAddedToken> added_tokens(const Fields& f, const json* list) {
  std::vector<HfAddedToken> tokens;
  if (list == nullptr || list->is_null()) return tokens;
  if (!list->is_array()) f.fail("added_tokens", "a list is expected", "save the tokenizer with `tokenizers`");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& t = list->at(i);
    const std::string field = fmt::format("added_tokens[{}]", i);
    const json* id = Fields::find(t, "id");
    if (id == nullptr) f.fail(field + ".id", "missing", "give every added token its id");
    HfAddedToken a;
    a.id = f.id_of(*id, field + ".id");
    a.content = f.string_at(t, "content", field);
    if (a.content.empty()) f.fail(field + ".content", "empty", "remove the token or give its text");
    a.special = f.flag(t, "special", field, false);
    a.lstrip = f.flag(t, "lstrip", field, false);
    a.rstrip = f.flag(t, "rstrip", field, false);
    a.normalized = f.flag(t, "normalized", field, !a.special);
    if (f.flag(t, "single_word", field, false)) f.unsupported(field + ".single_word", "true");
    tokens.push_back(std::move(a));
  }
  return tokens;
}

/// The ids of one post-processor piece ([token, id] of Roberta/Bert, or a template's special token).
int32_t pair_id(const Fields& f, const json& p, const char* key, const std::string& field) {
  const json* v = Fields::find(p, key);
  if (v == nullptr || !v->is_array() || v->size() != 2) f.fail(field + "." + key, "[token, id] is expected", kSupported);
  return f.id_of(v->at(1), field + "." + key + "[1]");
}

void template_processing(const Fields& f, const json& p, const std::string& field, HfTokenizerSpec& spec) {
  const json* single = Fields::find(p, "single");
  const json* specials = Fields::find(p, "special_tokens");
  if (single == nullptr || !single->is_array()) f.fail(field + ".single", "a list is expected", kSupported);
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string at = fmt::format("{}.single[{}]", field, i);
    const json& piece = single->at(i);
    if (const json* seq = Fields::find(piece, "Sequence")) {
      if (f.string_at(*seq, "id", at + ".Sequence") != "A" || seen_a) f.fail(at, "only one $A is supported", kSupported);
      seen_a = true;
      continue;
    }
    const json* token = Fields::find(piece, "SpecialToken");
    if (token == nullptr) f.fail(at, "neither Sequence nor SpecialToken", kSupported);
    const std::string name = f.string_at(*token, "id", at + ".SpecialToken");
    const json* entry = specials != nullptr ? Fields::find(*specials, name.c_str()) : nullptr;
    const json* ids = entry != nullptr ? Fields::find(*entry, "ids") : nullptr;
    if (ids == nullptr || !ids->is_array()) {
      f.fail(field + ".special_tokens", "no ids for " + core::echo_value(name), "list the token in special_tokens");
    }
    for (const auto& id : *ids) (seen_a ? spec.suffix_ids : spec.prefix_ids).push_back(f.id_of(id, at));
  }
  if (!seen_a) f.fail(field + ".single", "no $A (the text)", "put {\"Sequence\": {\"id\": \"A\"}} in the template");
}

void post_processor(const Fields& f, const json& p, const std::string& field, HfTokenizerSpec& spec) {
  if (p.is_null()) return;
  const std::string type = f.type_of(p, field);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    const json* list = Fields::find(p, "processors");
    if (list == nullptr || !list->is_array()) f.fail(field + ".processors", "a list is expected", kSupported);
    for (size_t i = 0; i < list->size(); ++i) {
      post_processor(f, list->at(i), fmt::format("{}.processors[{}]", field, i), spec);
    }
    return;
  }
  if (!spec.prefix_ids.empty() || !spec.suffix_ids.empty()) f.fail(field, "a second processor that adds tokens", kSupported);
  if (type == "TemplateProcessing") return template_processing(f, p, field, spec);
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    spec.prefix_ids.push_back(pair_id(f, p, "cls", field));
    spec.suffix_ids.push_back(pair_id(f, p, "sep", field));
    return;
  }
  f.unsupported(field + ".type", "post-processor " + type);
}

/// tokenizers ignores the ids written in added_tokens: loading the file it gives each token its id in
/// the vocabulary, else the next id after the vocabulary and the added tokens before it
/// (tokenizers/src/tokenizer/added_vocabulary.rs, add_tokens), and warns when that differs. Such a file
/// (edited by hand) is refused here rather than read with ids that differ from tokenizers'.
void check_added_ids(const Fields& f, const HfTokenizerSpec& spec) {
  std::unordered_map<std::string, int32_t> vocab(spec.model.vocab.begin(), spec.model.vocab.end());
  const auto vocab_len = static_cast<int64_t>(vocab.size());
  std::unordered_map<std::string, int32_t> added;
  int64_t max_added = -1;
  for (size_t i = 0; i < spec.added_tokens.size(); ++i) {
    const HfAddedToken& t = spec.added_tokens[i];
    int64_t expected = 0;
    if (const auto a = added.find(t.content); a != added.end()) {
      expected = a->second;
    } else if (const auto v = vocab.find(t.content); v != vocab.end()) {
      expected = v->second;
    } else {
      expected = max_added < 0 ? vocab_len : (max_added >= vocab_len || vocab_len == 0 ? max_added + 1 : vocab_len);
    }
    if (t.id != expected) {
      f.fail(fmt::format("added_tokens[{}].id", i),
             fmt::format("{} for {}, but tokenizers gives it id {} (the next id after model.vocab's {} tokens and "
                         "the added tokens before it)",
                         t.id, core::echo_value(t.content), expected, vocab_len),
             "save the tokenizer with `tokenizers` again, which writes the ids it uses");
    }
    added.emplace(t.content, t.id);
    max_added = std::max<int64_t>(max_added, t.id);
  }
}

/// A non-negative integer at obj[key] (serde's usize/u32), or absent/null when `optional`.
void check_unsigned(const Fields& f, const json& obj, const char* key, const std::string& field, bool optional) {
  const json* v = Fields::find(obj, key);
  if ((v == nullptr || v->is_null()) && optional) return;
  if (v == nullptr) f.fail(field + "." + key, "missing", "write it, or set " + field + " to null");
  if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
    f.fail(field + "." + key, "not a non-negative integer: " + core::echo_value(v->dump()),
           "write an integer >= 0, or set " + field + " to null");
  }
}

/// A string at obj[key] that is one of `names` (a serde enum), or absent when `optional`.
void check_variant(const Fields& f, const json& obj, const char* key, const std::string& field, bool optional,
                   std::initializer_list<const char*> names) {
  const json* v = Fields::find(obj, key);
  if (v == nullptr && optional) return;
  const bool known = v != nullptr && v->is_string() &&
                     std::any_of(names.begin(), names.end(), [&](const char* n) { return *v == n; });
  if (!known) {
    f.fail(field + "." + key, v == nullptr ? "missing" : "not one of the accepted values: " + core::echo_value(v->dump()),
           fmt::format("write one of {}, or set {} to null", fmt::join(names, ", "), field));
  }
}

/// `truncation` and `padding`: ppctl never applies them (a dataset keeps whole documents), but a file
/// that `tokenizers` refuses to load (tokenizers 0.23's TruncationParams / PaddingParams: null, or an
/// object with these fields) is refused here too rather than read as if it were fine.
void check_truncation_padding(const Fields& f, const json& root) {
  if (const json* t = Fields::find(root, "truncation"); t != nullptr && !t->is_null()) {
    if (!t->is_object()) {
      f.fail("truncation", "not null or an object: " + core::echo_value(t->dump()),
             "write null, or {\"max_length\": N, \"strategy\": \"LongestFirst\", \"stride\": 0, \"direction\": "
             "\"Right\"}");
    }
    check_variant(f, *t, "direction", "truncation", true, {"Left", "Right"});
    check_unsigned(f, *t, "max_length", "truncation", false);
    check_variant(f, *t, "strategy", "truncation", false, {"LongestFirst", "OnlyFirst", "OnlySecond"});
    check_unsigned(f, *t, "stride", "truncation", false);
  }
  if (const json* p = Fields::find(root, "padding"); p != nullptr && !p->is_null()) {
    if (!p->is_object()) {
      f.fail("padding", "not null or an object: " + core::echo_value(p->dump()),
             "write null, or the object `tokenizers` saves after enable_padding()");
    }
    const json* strategy = Fields::find(*p, "strategy");
    if (strategy != nullptr && strategy->is_object() && strategy->size() == 1 && strategy->contains("Fixed")) {
      check_unsigned(f, *strategy, "Fixed", "padding.strategy", false);
    } else {
      check_variant(f, *p, "strategy", "padding", false, {"BatchLongest"});  // or {"Fixed": N}, above
    }
    check_variant(f, *p, "direction", "padding", false, {"Left", "Right"});
    check_unsigned(f, *p, "pad_to_multiple_of", "padding", true);
    check_unsigned(f, *p, "pad_id", "padding", false);
    check_unsigned(f, *p, "pad_type_id", "padding", false);
    const json* token = Fields::find(*p, "pad_token");
    if (token == nullptr || !token->is_string()) {
      f.fail("padding.pad_token", token == nullptr ? "missing" : "not a string: " + core::echo_value(token->dump()),
             "write the padding token as a string, or set padding to null");
    }
  }
}

std::string tokenizer_file(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
}

}  // namespace

HfTokenizerSpec parse_hf_tokenizer_json(std::string_view text, const std::string& path) {
  const Fields f(path);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    f.fail("(the whole file)", std::string("not JSON: ") + core::escape_control(e.what()),
           "name the tokenizer.json that `tokenizers` or transformers saved");
  }
  if (!root.is_object()) f.fail("(the whole file)", "not a JSON object", "name a tokenizer.json");
  const json* model = Fields::find(root, "model");
  if (model == nullptr) f.fail("model", "missing", "name a tokenizer.json that `tokenizers` saved");
  HfTokenizerSpec spec;
  spec.path = path;
  spec.model = bpe_model(f, *model);
  const json* normalizer = Fields::find(root, "normalizer");
  spec.nfc = normalizer != nullptr && nfc_normalizer(f, *normalizer);
  const json* pre = Fields::find(root, "pre_tokenizer");
  spec.pre_tokenizer = pre_tokenizer(f, pre != nullptr ? *pre : json());
  spec.added_tokens = added_tokens(f, Fields::find(root, "added_tokens"));
  check_added_ids(f, spec);
  if (const json* post = Fields::find(root, "post_processor")) post_processor(f, *post, "post_processor", spec);
  check_truncation_padding(f, root);
  return spec;
}

HfTokenizerSpec read_hf_tokenizer_json(const std::string& path) {
  const std::string file = tokenizer_file(path);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw PrepareError(fmt::format("--tokenizer {}: {} (fix: name a Hugging Face tokenizer.json, or the model "
                                   "folder holding one; or bytes or sentencepiece)",
                                   core::echo_label(file), fs::exists(file, ec) ? "not a regular file" : "no such file"));
  }
  return parse_hf_tokenizer_json(read_input_file(file, "--tokenizer"), fs::absolute(file).lexically_normal().string());
}

std::optional<int32_t> hf_eos_id(const HfTokenizerSpec& spec) {
  const auto config = fs::path(spec.path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (fs::is_regular_file(config, ec)) {
    const json c = json::parse(read_input_file(config.string(), "tokenizer_config.json"), nullptr, false);
    const json* eos = Fields::find(c, "eos_token");
    if (eos != nullptr && eos->is_object()) eos = Fields::find(*eos, "content");
    if (eos != nullptr && eos->is_string()) {
      const std::string name = eos->get<std::string>();
      for (const auto& t : spec.added_tokens) {
        if (t.content == name) return t.id;
      }
      for (const auto& [token, id] : spec.model.vocab) {
        if (token == name) return id;
      }
    }
  }
  if (!spec.suffix_ids.empty()) return spec.suffix_ids.back();
  return std::nullopt;
}

}  // namespace ppctl::prepare
