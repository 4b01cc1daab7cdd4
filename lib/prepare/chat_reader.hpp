// The conversations of `ppctl data prepare --input-format chat`: JSONL lines holding `messages` (a list of
// {role, content}), or a prompt/completion pair (two strings, or TRL's conversational form: two lists of
// messages), checked and turned into one list of messages per line. No torch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/template.hpp"

namespace ppctl::prepare {

/// One conversation: the messages in order, each an object with a string `role` (system, user,
/// assistant or tool) and a string `content`; any other keys of a message (`tool_calls`, `name`,
/// `reasoning_content`, ...) are kept as written, since a template may read them, as transformers
/// passes them through.
struct Conversation {
  jinja::Json messages = jinja::Json::array();
  /// The line's top-level "tools" (a list of tool schemas, TRL's "tools" column), passed to the template as
  /// apply_chat_template(messages, tools=...) passes it; null when the line has none.
  jinja::Json tools;
  int64_t line = 0;  ///< the 1-based line of the JSONL file it came from
  /// Number of assistant messages.
  int64_t assistant_turns = 0;
};

/// The deepest nesting of containers ({} and []) a chat line or --chat-context may hold: the template
/// engine's depth limit (jinja::Limits::max_depth), counting the line's own object as 1.
inline constexpr int kMaxJsonDepth = jinja::Limits{}.max_depth;

/// `text` parsed as JSON, with containers nested at most `max_depth` deep, checked while it parses (so no
/// deeper value is ever built: copying or converting one recurses once per level, and a value nested tens
/// of thousands deep overflows the stack). nullopt when it nests deeper; throws jinja::Json::parse_error
/// when it is not JSON.
std::optional<jinja::Json> parse_json_within(std::string_view text, int max_depth);

/// Parses JSONL line `line` (1-based) of `path`. Accepted forms (keys other than these and "tools" are
/// ignored):
///   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}
///   {"prompt": "...", "completion": "..."}                 = one user and one assistant message
///   {"prompt": [MESSAGES], "completion": [MESSAGES]}       = TRL's conversational form: both, in order
/// A top-level "tools" must be a list (or null). Throws prepare::PrepareError "PATH:LINE: PROBLEM (fix:
/// ...)" when the line is not JSON (a byte that is not UTF-8: that byte, and the fix to re-encode the
/// file), nests deeper than `max_depth` (kMaxJsonDepth), is not a JSON object, has
/// neither `messages` nor `prompt`, or both, lacks `completion`, mixes strings and lists, a message is not
/// an object, a role is missing or not one of system/user/assistant/tool, a content is missing or not a
/// string, or the conversation holds no message.
Conversation parse_conversation(std::string_view text, const std::string& path, int64_t line,
                                int max_depth = kMaxJsonDepth);

/// Calls `on_conversation` for each non-blank line of the JSONL file `path` (in order) and
/// `on_bytes(n)` after each n bytes consumed. Throws what parse_conversation throws, and
/// prepare::PrepareError naming the file when it cannot be read.
void read_conversations(const std::string& path, const std::function<void(const Conversation&)>& on_conversation,
                        const std::function<void(int64_t)>& on_bytes, int max_depth = kMaxJsonDepth);

}  // namespace ppctl::prepare
