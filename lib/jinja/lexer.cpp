// The template lexer (see lexer.hpp); the whitespace rules follow jinja2's lexer.py with trim_blocks and
// lstrip_blocks on, as transformers' chat_template_utils.py builds its environment.
#include "jinja/lexer.hpp"

#include <cstdlib>

#include "jinja/template.hpp"
#include "jinja/text.hpp"

namespace ppctl::jinja {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  Lexer(std::string source, const std::string& origin) : src_(std::move(source)), origin_(origin) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool at_line_start = true;  // the text starts a line: lstrip_blocks may strip it before the first newline
    while (pos < src_.size()) {
      const size_t open = find_open(pos);
      std::string data = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        emit_text(data);
        break;
      }
      const char kind = src_[open + 1];
      const char marker = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (marker == '-') {
        data = rstrip(data);
      } else if (marker != '+' && kind != '{') {
        lstrip(data, at_line_start);
      }
      emit_text(data);
      line_ += count_newlines(src_.substr(pos, open - pos));
      pos = open + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      pos = kind == '#' ? comment(pos) : tag(pos, kind);
      at_line_start = pos > 0 && src_[pos - 1] == '\n';  // jinja2's line_starting
    }
    push(Token::Kind::End, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(origin_, line_, message); }

  static int count_newlines(std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
  }

  static std::string rstrip(const std::string& s) {
    size_t e = s.size();
    while (e > 0 && is_blank(s[e - 1])) --e;
    return s.substr(0, e);
  }

  /// lstrip_blocks: drop the spaces and tabs between the line's start and the tag, if nothing else is there.
  static void lstrip(std::string& data, bool first_line) {
    const size_t nl = data.rfind('\n');
    if (nl == std::string::npos && !first_line) return;
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    if (data.find_first_not_of(" \t", from) == std::string::npos) data.resize(from);
  }

  size_t find_open(size_t pos) const {
    while (true) {
      const size_t at = src_.find('{', pos);
      if (at == std::string::npos || at + 1 >= src_.size()) return src_.size();
      const char c = src_[at + 1];
      if (c == '{' || c == '%' || c == '#') return at;
      pos = at + 1;
    }
  }

  void push(Token::Kind kind, std::string text) { tokens_.push_back(Token{kind, std::move(text), 0, 0.0, line_}); }

  void emit_text(const std::string& data) {
    if (!data.empty()) push(Token::Kind::Text, data);
  }

  /// After a block or comment end: `-` strips all whitespace, else trim_blocks drops one newline (`+` keeps it).
  size_t after_end(size_t pos, char marker) {
    if (marker == '-') {
      while (pos < src_.size() && is_blank(src_[pos])) {
        line_ += src_[pos] == '\n';
        ++pos;
      }
    } else if (marker != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++line_;
      ++pos;
    }
    return pos;
  }

  size_t comment(size_t pos) {
    const size_t end = src_.find("#}", pos);
    if (end == std::string::npos) fail("missing end of comment tag");
    line_ += count_newlines(std::string_view(src_).substr(pos, end - pos));
    const char marker = end > pos && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    return after_end(end + 2, marker);
  }

  size_t tag(size_t pos, char kind) {
    const bool block = kind == '%';
    push(block ? Token::Kind::BlockBegin : Token::Kind::VarBegin, "");
    int depth = 0;
    while (true) {
      while (pos < src_.size() && is_blank(src_[pos])) {
        line_ += src_[pos] == '\n';
        ++pos;
      }
      if (pos >= src_.size()) fail(block ? "unexpected end of template: a block tag '{%' is not closed with '%}'"
                                         : "unexpected end of template: '{{' is not closed with '}}'");
      const std::string_view rest = std::string_view(src_).substr(pos);
      if (depth == 0) {
        const std::string_view close = block ? "%}" : "}}";
        for (const char marker : {'-', '+', '\0'}) {
          if (marker == '+' && !block) continue;
          const std::string end = marker ? std::string(1, marker) + std::string(close) : std::string(close);
          if (rest.substr(0, end.size()) == end) {
            push(block ? Token::Kind::BlockEnd : Token::Kind::VarEnd, "");
            pos += end.size();
            return block ? after_end(pos, marker) : (marker == '-' ? after_end(pos, '-') : pos);
          }
        }
      }
      const char c = rest[0];
      if (is_name_start(c)) {
        size_t n = 1;
        while (n < rest.size() && (is_name_start(rest[n]) || is_digit(rest[n]))) ++n;
        push(Token::Kind::Name, std::string(rest.substr(0, n)));
        pos += n;
      } else if (is_digit(c)) {
        pos += number(rest);
      } else if (c == '\'' || c == '"') {
        pos += string(rest);
      } else {
        pos += op(rest, depth);
      }
    }
  }

  size_t number(std::string_view rest) {
    size_t n = 0;
    std::string digits;
    auto run = [&] {
      while (n < rest.size() && (is_digit(rest[n]) || (rest[n] == '_' && n + 1 < rest.size() && is_digit(rest[n + 1])))) {
        if (rest[n] != '_') digits += rest[n];
        ++n;
      }
    };
    run();
    bool is_float = false;
    if (n + 1 < rest.size() && rest[n] == '.' && is_digit(rest[n + 1])) {
      is_float = true;
      digits += rest[n++];
      run();
    }
    if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && is_digit(rest[m])) {
        is_float = true;
        digits += 'e';
        digits += std::string(rest.substr(n + 1, m - n - 1));
        n = m;
        run();
      }
    }
    if (is_float) {
      Token t{Token::Kind::Float, digits, 0, std::strtod(digits.c_str(), nullptr), line_};
      tokens_.push_back(t);
    } else {
      errno = 0;
      const long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal " + digits + " is out of range (at most 64 bits)");
      tokens_.push_back(Token{Token::Kind::Integer, digits, v, 0.0, line_});
    }
    return n;
  }

  /// A string literal, its escapes read as Python's unicode-escape codec reads them (jinja2 does so).
  size_t string(std::string_view rest) {
    const char quote = rest[0];
    std::string value;
    const int start_line = line_;
    size_t n = 1;
    while (true) {
      if (n >= rest.size()) {
        line_ = start_line;
        fail("unexpected end of string: a string literal is not closed");
      }
      const char c = rest[n];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || n + 1 >= rest.size()) {
        value += c;
        ++n;
        continue;
      }
      const char e = rest[n + 1];
      n += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': ++line_; break;
        case 'x': case 'u': case 'U': {
          const size_t width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (n + width > rest.size()) fail("truncated \\" + std::string(1, e) + " escape in a string literal");
          const std::string hex(rest.substr(n, width));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + width || hex.find_first_of("+- ") != std::string::npos || cp > 0x10FFFF) {
            fail("bad \\" + std::string(1, e) + " escape in a string literal");
          }
          text::append_utf8(value, static_cast<char32_t>(cp));
          n += width;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned cp = static_cast<unsigned>(e - '0');
            for (int k = 0; k < 2 && n < rest.size() && rest[n] >= '0' && rest[n] <= '7'; ++k) {
              cp = cp * 8 + static_cast<unsigned>(rest[n++] - '0');
            }
            text::append_utf8(value, cp);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    tokens_.push_back(Token{Token::Kind::String, value, 0, 0.0, start_line});
    return n + 1;
  }

  size_t op(std::string_view rest, int& depth) {
    static const char* const two[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* t : two) {
      if (rest.substr(0, 2) == t) {
        push(Token::Kind::Operator, t);
        return 2;
      }
    }
    const char c = rest[0];
    if (std::string_view("+-*/%~()[]{},.:|=<>").find(c) == std::string_view::npos) {
      fail(std::string("unexpected character '") + (static_cast<unsigned char>(c) < 0x20 ? '?' : c) + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    push(Token::Kind::Operator, std::string(1, c));
    return 1;
  }

  std::string src_;
  const std::string& origin_;
  int line_ = 1;
  std::vector<Token> tokens_;
};

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      out += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out += source[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& origin) {
  return Lexer(normalize_newlines(source), origin).run();
}

}  // namespace ppctl::jinja
