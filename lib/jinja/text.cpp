// Python's str methods over UTF-8 text (see text.hpp).
#include "jinja/text.hpp"

#include <algorithm>
#include <cstdio>

namespace ppctl::jinja::text {

char32_t decode_one(std::string_view s, size_t* length) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  bool ok = n != 0 && n <= s.size();
  for (size_t k = 1; ok && k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[k]);
    ok = (b & 0xC0) == 0x80;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (!ok) {
    *length = 1;
    return b0;  // a bad byte stands for itself
  }
  *length = n;
  return cp;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    offsets.push_back(i);
    size_t n = 1;
    decode_one(s.substr(i), &n);
    i += n;
  }
  offsets.push_back(s.size());
  return offsets;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

namespace {

/// The code points of `s` with their byte ranges.
struct Units {
  std::vector<size_t> at;
  std::string_view s;
  explicit Units(std::string_view text) : at(code_point_offsets(text)), s(text) {}
  size_t size() const { return at.size() - 1; }
  char32_t cp(size_t k) const {
    size_t n = 1;
    return decode_one(s.substr(at[k]), &n);
  }
};

bool in_set(char32_t cp, const std::optional<std::string>& chars) {
  if (!chars) return is_space(cp);
  const Units set(*chars);
  for (size_t k = 0; k < set.size(); ++k) {
    if (set.cp(k) == cp) return true;
  }
  return false;
}

/// Python's "cased" letters, approximated: ASCII letters and the Latin, Greek and Cyrillic blocks.
bool is_cased(char32_t cp) {
  return (cp < 0x80 && std::isalpha(static_cast<int>(cp))) || (cp >= 0xC0 && cp <= 0x52F && cp != 0xD7 && cp != 0xF7);
}

/// Simple case mapping of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters (Python's str.upper
/// and str.lower agree there, ß and the other one-to-many mappings aside); other code points map to themselves.
char32_t case_map(char32_t cp, bool to_upper) {
  if (cp < 0x80) {
    if (to_upper && cp >= 'a' && cp <= 'z') return cp - 32;
    if (!to_upper && cp >= 'A' && cp <= 'Z') return cp + 32;
    return cp;
  }
  struct Range {
    char32_t lower_first, lower_last, upper_first;
  };
  static const Range ranges[] = {{0xE0, 0xF6, 0xC0}, {0xF8, 0xFE, 0xD8}, {0x3B1, 0x3C1, 0x391},
                                 {0x3C3, 0x3CB, 0x3A3}, {0x430, 0x44F, 0x410}, {0x450, 0x45F, 0x400}};
  for (const Range& r : ranges) {
    const char32_t upper_last = r.upper_first + (r.lower_last - r.lower_first);
    if (to_upper && cp >= r.lower_first && cp <= r.lower_last) return r.upper_first + (cp - r.lower_first);
    if (!to_upper && cp >= r.upper_first && cp <= upper_last) return r.lower_first + (cp - r.upper_first);
  }
  if (to_upper && cp == 0x3C2) return 0x3A3;  // final sigma
  if (to_upper && cp == 0xFF) return 0x178;
  if (!to_upper && cp == 0x178) return 0xFF;
  // Latin Extended-A: pairs (upper even, lower odd), except 0x139-0x148 and 0x179-0x17E (upper odd).
  const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
  if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177) || odd_upper) {
    const bool is_upper = (cp % 2 == 0) != odd_upper;
    if (to_upper && !is_upper) return cp - 1;
    if (!to_upper && is_upper) return cp + 1;
  }
  return cp;
}

/// `s` with each code point mapped by `f(index, code point)`.
template <typename F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0, k = 0;
  while (i < s.size()) {
    size_t n = 1;
    const char32_t cp = decode_one(s.substr(i), &n);
    const char32_t mapped = f(k++, cp);
    if (mapped == cp) {
      out += s.substr(i, n);  // keeps a bad byte as it was
    } else {
      append_utf8(out, mapped);
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const Units u(s);
  size_t b = 0, e = u.size();
  while (left && b < e && in_set(u.cp(b), chars)) ++b;
  while (right && e > b && in_set(u.cp(e - 1), chars)) --e;
  return std::string(s.substr(u.at[b], u.at[e] - u.at[b]));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, long maxsplit,
                               bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    std::string_view rest = s;
    while (maxsplit < 0 || static_cast<long>(parts.size()) < maxsplit) {
      const size_t at = from_right ? rest.rfind(*sep) : rest.find(*sep);
      if (at == std::string_view::npos) break;
      if (from_right) {
        parts.emplace_back(rest.substr(at + sep->size()));
        rest = rest.substr(0, at);
      } else {
        parts.emplace_back(rest.substr(0, at));
        rest = rest.substr(at + sep->size());
      }
    }
    parts.emplace_back(rest);
    if (from_right) std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Runs of whitespace; the remainder after maxsplit splits keeps its inner whitespace.
  const Units u(s);
  const size_t n = u.size();
  if (!from_right) {
    size_t k = 0;
    while (true) {
      while (k < n && is_space(u.cp(k))) ++k;
      if (k == n) break;
      if (maxsplit >= 0 && static_cast<long>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > k && is_space(u.cp(e - 1))) --e;
        parts.emplace_back(s.substr(u.at[k], u.at[e] - u.at[k]));
        break;
      }
      const size_t b = k;
      while (k < n && !is_space(u.cp(k))) ++k;
      parts.emplace_back(s.substr(u.at[b], u.at[k] - u.at[b]));
    }
    return parts;
  }
  size_t k = n;
  while (true) {
    while (k > 0 && is_space(u.cp(k - 1))) --k;
    if (k == 0) break;
    if (maxsplit >= 0 && static_cast<long>(parts.size()) == maxsplit) {
      size_t b = 0;
      while (b < k && is_space(u.cp(b))) ++b;
      parts.emplace_back(s.substr(u.at[b], u.at[k] - u.at[b]));
      break;
    }
    const size_t e = k;
    while (k > 0 && !is_space(u.cp(k - 1))) --k;
    parts.emplace_back(s.substr(u.at[k], u.at[e] - u.at[k]));
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view s) {
  std::vector<std::string> lines;
  size_t begin = 0, i = 0;
  while (i < s.size()) {
    size_t n = 1;
    const char32_t cp = decode_one(s.substr(i), &n);
    const bool end = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1C && cp <= 0x1E) ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (end) {
      lines.emplace_back(s.substr(begin, i - begin));
      if (cp == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++n;
      begin = i + n;
    }
    i += n;
  }
  if (begin < s.size()) lines.emplace_back(s.substr(begin));
  return lines;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, long count) {
  std::string out;
  if (old.empty()) {
    const Units u(s);
    for (size_t k = 0; k <= u.size(); ++k) {
      if (count < 0 || static_cast<long>(k) < count) out += with;
      if (k < u.size()) out += s.substr(u.at[k], u.at[k + 1] - u.at[k]);
    }
    return out;
  }
  size_t from = 0;
  long done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, from);
    if (at == std::string_view::npos) break;
    out += s.substr(from, at - from);
    out += with;
    from = at + old.size();
    ++done;
  }
  out += s.substr(from);
  return out;
}

std::string upper(std::string_view s) {
  return map_code_points(s, [](size_t, char32_t cp) { return case_map(cp, true); });
}

std::string lower(std::string_view s) {
  return map_code_points(s, [](size_t, char32_t cp) { return case_map(cp, false); });
}

std::string title(std::string_view s) {
  bool after_cased = false;
  return map_code_points(s, [&](size_t, char32_t cp) {
    const char32_t mapped = case_map(cp, !after_cased);
    after_cased = is_cased(cp);
    return mapped;
  });
}

std::string capitalize(std::string_view s) {
  return map_code_points(s, [](size_t k, char32_t cp) { return case_map(cp, k == 0); });
}

namespace {

/// Python's str.isprintable() for one code point, approximated by the ranges chat text meets.
bool printable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F)) {
    return false;
  }
  return !(cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0xD800 && cp <= 0xDFFF) ||
           cp > 0x10FFFF);
}

}  // namespace

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const char quote = has_single && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    size_t n = 1;
    const char32_t cp = decode_one(s.substr(i), &n);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!printable(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                    static_cast<unsigned>(cp));
      out += buf;
    } else {
      out += s.substr(i, n);
    }
    i += n;
  }
  out += quote;
  return out;
}

}  // namespace ppctl::jinja::text
