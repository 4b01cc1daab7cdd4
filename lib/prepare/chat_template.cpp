// Finding a model's chat template and rendering conversations with it.
#include "prepare/chat_template.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "core/echo.hpp"
#include "prepare/document_reader.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

namespace fs = std::filesystem;
using jinja::Json;

constexpr std::array<const char*, 7> kSpecialNames = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                     "pad_token", "cls_token", "mask_token"};
constexpr const char* kHowToPass =
    "pass the template with --chat-template FILE.jinja (or a tokenizer_config.json that holds one), e.g. "
    "one of the model's published templates";

std::string absolute_path(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

Json read_config(const fs::path& path) {
  const std::string text = read_input_file(path.string(), "--chat-template");
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    throw PrepareError(fmt::format("{}: not JSON ({}) (fix: name the tokenizer_config.json transformers saved)",
                                   core::echo_label(path.string()), core::escape_control(e.what())));
  }
}

/// The special tokens a config names (strings, or AddedToken objects with a string `content`).
Json special_tokens_of(const Json& config) {
  Json out = Json::object();
  if (!config.is_object()) return out;
  for (const char* name : kSpecialNames) {
    const auto it = config.find(name);
    if (it == config.end()) continue;
    if (it->is_string()) out[name] = *it;
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) out[name] = (*it)["content"];
  }
  return out;
}

/// The template text of a config's `chat_template`, or nullopt when it has none.
std::optional<std::string> template_of(const Json& config, const std::string& path) {
  const auto it = config.is_object() ? config.find("chat_template") : config.end();
  if (!config.is_object() || it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::vector<std::string> names;
    for (const Json& t : *it) {
      if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["template"].is_string()) {
        break;
      }
      if (t["name"] == "default") return t["template"].get<std::string>();
      names.push_back(core::echo_value(t["name"].dump()));
    }
    throw PrepareError(fmt::format("{}: chat_template: a list of named templates ({}) without one named "
                                   "\"default\" (fix: {})",
                                   core::echo_label(path), fmt::join(names, ", "), kHowToPass));
  }
  throw PrepareError(fmt::format("{}: chat_template: a JSON {}, not a string or a list of {{name, template}} "
                                 "(fix: {})",
                                 core::echo_label(path), it->type_name(), kHowToPass));
}

fs::path folder_of(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
}

}  // namespace

ChatTemplateSource find_chat_template(const std::string& tokenizer, const std::string& chat_template) {
  std::error_code ec;
  const fs::path tokenizer_folder = folder_of(tokenizer);
  fs::path config_path = tokenizer_folder / "tokenizer_config.json";
  fs::path template_file;  // a .jinja
  // The folder searched (--chat-template's, or --tokenizer's) and how to name it in an error.
  std::string folder_named = fmt::format("the folder of --tokenizer, {},", core::echo_label(tokenizer_folder.string()));
  if (!chat_template.empty()) {
    if (!fs::exists(chat_template, ec)) {
      throw PrepareError(fmt::format("--chat-template {}: no such file (fix: name a .jinja file, a "
                                     "tokenizer_config.json, or the model folder holding one)",
                                     core::echo_label(chat_template)));
    }
    if (fs::is_directory(chat_template, ec)) {
      const fs::path jinja = fs::path(chat_template) / "chat_template.jinja";
      if (fs::is_regular_file(jinja, ec)) template_file = jinja;
      config_path = fs::path(chat_template) / "tokenizer_config.json";
      folder_named = fmt::format("--chat-template {}", core::echo_label(chat_template));
    } else if (fs::path(chat_template).extension() == ".json") {
      config_path = chat_template;
    } else {
      template_file = chat_template;
    }
  } else if (fs::is_regular_file(tokenizer_folder / "chat_template.jinja", ec)) {
    template_file = tokenizer_folder / "chat_template.jinja";
  }
  ChatTemplateSource source;
  Json config = Json::object();
  const bool have_config = fs::is_regular_file(config_path, ec);
  if (have_config) config = read_config(config_path);
  source.special_tokens = special_tokens_of(config);
  if (!template_file.empty()) {
    source.text = read_input_file(template_file.string(), "--chat-template");
    source.path = absolute_path(template_file);
    source.origin = source.path;
    return source;
  }
  const auto text = have_config ? template_of(config, config_path.string()) : std::nullopt;
  if (!text && have_config) {
    throw PrepareError(fmt::format("--input-format chat: {} holds no chat template (no \"chat_template\") (fix: {})",
                                   core::echo_label(config_path.string()), kHowToPass));
  }
  if (!text) {
    throw PrepareError(fmt::format("--input-format chat: {} is a folder that holds neither chat_template.jinja nor "
                                   "tokenizer_config.json, so there is no chat template (fix: {}, or name the model "
                                   "folder that holds them)",
                                   folder_named, kHowToPass));
  }
  source.text = *text;
  source.path = absolute_path(config_path);
  source.origin = source.path + ": chat_template";
  return source;
}

std::time_t chat_clock(const std::string& date) {
  std::tm tm{};
  if (date.empty()) {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  } else {
    int y = 0, m = 0, d = 0;
    char tail = 0;
    if (date.size() != 10 || std::sscanf(date.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 || m < 1 ||
        m > 12 || d < 1 || d > 31 || y < 1900) {
      throw PrepareError(fmt::format("--chat-date {}: not a date written YYYY-MM-DD (fix: e.g. --chat-date "
                                     "2026-01-31)",
                                     core::echo_value(date)));
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
  }
  tm.tm_hour = 12;
  tm.tm_min = tm.tm_sec = 0;
  tm.tm_isdst = -1;
  const int want_day = tm.tm_mday;
  const std::time_t clock = std::mktime(&tm);
  if (tm.tm_mday != want_day) {  // mktime carried 2026-02-30 into March
    throw PrepareError(fmt::format("--chat-date {}: no such day (fix: a real date, YYYY-MM-DD)",
                                   core::echo_value(date)));
  }
  return clock;
}

std::string chat_date_text(std::time_t clock) {
  std::tm tm{};
  localtime_r(&clock, &tm);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &tm);
  return text;
}

ChatTemplate::ChatTemplate(ChatTemplateSource source, Json extra, jinja::RenderOptions options)
    : source_(std::move(source)),
      template_([this]() -> jinja::Template {
        try {
          return jinja::Template(source_.text, source_.origin);
        } catch (const jinja::TemplateError& e) {
          throw PrepareError(fmt::format("chat template {} (fix: correct the template, or pass another with "
                                         "--chat-template)",
                                         e.what()));
        }
      }()),
      options_(options) {
  if (!extra.is_object()) {
    throw PrepareError(fmt::format("--chat-context: a JSON {}, not an object (fix: e.g. --chat-context "
                                   "'{{\"enable_thinking\": false}}')",
                                   extra.type_name()));
  }
  context_ = Json::object();
  context_["messages"] = Json::array();
  context_["tools"] = nullptr;
  context_["documents"] = nullptr;
  context_["add_generation_prompt"] = false;
  for (const auto& [key, value] : source_.special_tokens.items()) context_[key] = value;
  for (const auto& [key, value] : extra.items()) {
    if (key == "messages" || key == "add_generation_prompt") {
      throw PrepareError(fmt::format("--chat-context: \"{}\" is set by ppctl for every render (the conversation's "
                                     "messages; add_generation_prompt false, true for the mask's prefix renders) "
                                     "(fix: drop it from --chat-context; conversations go in --input)",
                                     core::echo_value(key)));
    }
    context_[key] = value;
  }
  static const std::regex kGeneration(R"(\{%-?\s*generation\s*-?%\})");
  generation_ = std::regex_search(source_.text, kGeneration);
}

jinja::Rendered ChatTemplate::render(const Json& messages, size_t count, bool add_generation_prompt,
                                     const Json& tools) const {
  Json context = context_;
  Json& list = context["messages"];
  for (size_t i = 0; i < count && i < messages.size(); ++i) list.push_back(messages[i]);
  context["add_generation_prompt"] = add_generation_prompt;
  if (!tools.is_null()) context["tools"] = tools;
  return template_.render(context, options_);
}

}  // namespace ppctl::prepare
