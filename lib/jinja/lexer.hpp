// Splits a template into text and tag tokens, applying jinja2's whitespace control as transformers
// configures it (trim_blocks, lstrip_blocks, `-` and `+` markers, one trailing newline dropped).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ppctl::jinja {

struct Token {
  enum class Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };
  Kind kind;
  std::string text;  // Text: the output text; Name, Operator: the spelling; String: the decoded value
  int64_t integer = 0;
  double real = 0.0;
  int line = 1;
};

/// The tokens of `source`, ending with Kind::End. Newlines (\r\n, \r) read as \n, as jinja2 reads them.
/// Throws TemplateError (naming `origin` and the line) on an unclosed tag, comment or string, or a character
/// that starts no token.
std::vector<Token> lex(std::string_view source, const std::string& origin);

}  // namespace ppctl::jinja
