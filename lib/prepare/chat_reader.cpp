// Reading chat JSONL lines into conversations, with errors naming the file, the line and the field.
#include "prepare/chat_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/echo.hpp"
#include "prepare/document_reader.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

using jinja::Json;

constexpr const char* kForms =
    "write {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}, {\"role\": \"assistant\", \"content\": "
    "\"...\"}]} or {\"prompt\": \"...\", \"completion\": \"...\"}";
constexpr std::array<const char*, 4> kRoles = {"system", "user", "assistant", "tool"};

/// Errors of one line: "PATH:LINE: FIELD: PROBLEM (fix: FIX)".
struct Line {
  const std::string& path;
  int64_t number;

  [[noreturn]] void fail(const std::string& field, const std::string& problem, const std::string& fix) const {
    throw PrepareError(fmt::format("{}:{}: {}{} (fix: {})", core::echo_label(path), number,
                                   field.empty() ? "" : field + ": ", problem, fix));
  }
};

/// "a" or "an" before a JSON type name ("an array", "an object", "a string").
std::string a_type(const Json& j) {
  const std::string name = j.type_name();
  return (std::string("aeiou").find(name[0]) != std::string::npos ? "an " : "a ") + name;
}

/// Thrown by the parser callback of parse_json_within when a container opens deeper than its limit.
struct TooDeep {};

/// Checks the messages of `list` (found at `field`) and appends them to `out`.
void append_messages(const Line& at, const Json& list, const std::string& field, Conversation& out) {
  if (!list.is_array()) at.fail(field, fmt::format("{}, not a list of messages", a_type(list)), kForms);
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& m = list[i];
    const std::string here = fmt::format("{}[{}]", field, i);
    if (!m.is_object()) {
      at.fail(here, fmt::format("{}, not a message object", a_type(m)),
              "write each message as {\"role\": \"user\", \"content\": \"...\"}");
    }
    const auto role = m.find("role");
    if (role == m.end()) at.fail(here, "no \"role\"", "give every message a role: system, user, assistant or tool");
    if (!role->is_string() ||
        std::none_of(kRoles.begin(), kRoles.end(), [&](const char* r) { return *role == r; })) {
      at.fail(here + ".role", fmt::format("{} is not a known role", core::echo_value(role->dump())),
              "use system, user, assistant or tool");
    }
    const auto content = m.find("content");
    if (content == m.end()) at.fail(here, "no \"content\"", "give every message its text as \"content\"");
    if (!content->is_string()) {
      at.fail(here + ".content", fmt::format("{}, not a string", a_type(*content)),
              "write the message's text as one string (lists of content parts are not read)");
    }
    if (*role == "assistant") ++out.assistant_turns;
    out.messages.push_back(m);
  }
}

}  // namespace

std::optional<Json> parse_json_within(std::string_view text, int max_depth) {
  // `depth` counts the containers around the one that opens (0 for the outermost).
  const Json::parser_callback_t limit = [max_depth](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), limit);
  } catch (const TooDeep&) {
    return std::nullopt;
  }
}

Conversation parse_conversation(std::string_view text, const std::string& path, int64_t line, int max_depth) {
  const Line at{path, line};
  std::optional<Json> parsed;
  try {
    parsed = parse_json_within(text, max_depth);
  } catch (const Json::parse_error& e) {
    const LineProblem p = json_line_problem(text, e.what(), e.byte, "write one JSON object per line: " + std::string(kForms));
    at.fail("", p.problem, p.fix);
  } catch (const Json::out_of_range& e) {  // a number beyond a double's range, such as 2E615
    at.fail("", fmt::format("a number on the line does not fit a double ({})", e.what()),
            "write numbers within about 1.8e308, or as strings");
  }
  if (!parsed) {
    at.fail("", fmt::format("the line nests {{}} and [] deeper than the limit of {} levels (the chat template "
                            "engine's depth limit)",
                            max_depth),
            "flatten the nested values of the line; a template cannot read them that deep");
  }
  const Json& value = *parsed;
  if (!value.is_object()) at.fail("", fmt::format("{}, not an object", a_type(value)), kForms);
  Conversation c;
  c.line = line;
  const auto messages = value.find("messages");
  const auto prompt = value.find("prompt");
  if (messages != value.end() && prompt != value.end()) {
    at.fail("", "both \"messages\" and \"prompt\"", "keep one form per line: " + std::string(kForms));
  }
  if (messages != value.end()) {
    append_messages(at, *messages, "messages", c);
  } else if (prompt != value.end()) {
    const auto completion = value.find("completion");
    if (completion == value.end()) at.fail("", "\"prompt\" without \"completion\"", kForms);
    if (prompt->is_string() && completion->is_string()) {
      c.messages.push_back(Json{{"role", "user"}, {"content", *prompt}});
      c.messages.push_back(Json{{"role", "assistant"}, {"content", *completion}});
      c.assistant_turns = 1;
    } else if (prompt->is_array() && completion->is_array()) {
      append_messages(at, *prompt, "prompt", c);
      append_messages(at, *completion, "completion", c);
    } else {
      at.fail("", fmt::format("\"prompt\" is {} and \"completion\" {}", a_type(*prompt), a_type(*completion)),
              "make both strings, or both lists of messages (TRL's conversational form)");
    }
  } else {
    at.fail("", "no \"messages\" and no \"prompt\"", kForms);
  }
  if (c.messages.empty()) at.fail("", "an empty conversation (no message)", "remove the line or add its messages");
  const auto tools = value.find("tools");
  if (tools != value.end() && !tools->is_null()) {
    if (!tools->is_array()) {
      at.fail("tools", fmt::format("{}, not a list of tool schemas", a_type(*tools)),
              "write \"tools\" as a list of JSON schemas, e.g. [{\"type\": \"function\", \"function\": {...}}], "
              "or drop it");
    }
    c.tools = *tools;
  }
  return c;
}

void read_conversations(const std::string& path, const std::function<void(const Conversation&)>& on_conversation,
                        const std::function<void(int64_t)>& on_bytes, int max_depth) {
  read_jsonl_lines(path, [&](int64_t number, std::string_view line) {
    on_conversation(parse_conversation(line, path, number, max_depth));
  }, on_bytes);
}

}  // namespace ppctl::prepare
