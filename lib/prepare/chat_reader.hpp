// The conversations of `ppctl data prepare --input-format chat`: JSONL lines holding `messages` (a list of
// {role, content}), or a prompt/completion pair (two strings, or TRL's conversational form: two lists of
// messages), checked and turned into one list of messages per line. No torch.
#pragma once

#include <cstdint>
#include <functional>
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
  int64_t line = 0;  ///< the 1-based line of the JSONL file it came from
  /// Number of assistant messages.
  int64_t assistant_turns = 0;
};

/// Parses JSONL line `line` (1-based) of `path`. Accepted forms (keys other than these are ignored):
///   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}
///   {"prompt": "...", "completion": "..."}                 = one user and one assistant message
///   {"prompt": [MESSAGES], "completion": [MESSAGES]}       = TRL's conversational form: both, in order
/// Throws prepare::PrepareError "PATH:LINE: PROBLEM (fix: ...)" when the line is not a JSON object, has
/// neither `messages` nor `prompt`, or both, lacks `completion`, mixes strings and lists, a message is not
/// an object, a role is missing or not one of system/user/assistant/tool, a content is missing or not a
/// string, or the conversation holds no message.
Conversation parse_conversation(std::string_view text, const std::string& path, int64_t line);

/// Calls `on_conversation` for each non-blank line of the JSONL file `path` (in order) and
/// `on_bytes(n)` after each n bytes consumed. Throws what parse_conversation throws, and
/// prepare::PrepareError naming the file when it cannot be read.
void read_conversations(const std::string& path, const std::function<void(const Conversation&)>& on_conversation,
                        const std::function<void(int64_t)>& on_bytes);

}  // namespace ppctl::prepare
