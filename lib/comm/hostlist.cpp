// Slurm host-list expansion and compressed rank lists (see hostlist.hpp).
#include "comm/hostlist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/error.hpp"
#include "core/rank_list.hpp"

namespace ppctl::comm {
namespace {

struct Context {
  const std::string& text;
  const std::string& variable;

  [[noreturn]] void fail(const std::string& rule) const {
    throw CommError(fmt::format("{}='{}': {} (fix: use Slurm's host-list form, e.g. "
                                "node[01-03,07],gpu5)",
                                variable, text, rule));
  }
};

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

/// The numbers of one bracket group's body (`01-03,07`), each formatted with its range's width.
std::vector<std::string> expand_group(const std::string& body, const Context& ctx) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    const size_t comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos
                                                                            : comma - start);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9) {
      ctx.fail(fmt::format("'[{}]' holds '{}', which is not a number or a range lo-hi", body, item));
    }
    const long first = std::stol(lo), last = std::stol(hi);
    if (last < first) ctx.fail(fmt::format("range '{}' ends below its start", item));
    for (long n = first; n <= last; ++n) {
      out.push_back(fmt::format("{:0{}d}", n, static_cast<int>(lo.size())));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// Every host one entry (`r[1-2]n[01-02]x`) names.
std::vector<std::string> expand_entry(const std::string& entry, const Context& ctx) {
  if (entry.empty()) ctx.fail("an entry is empty");
  std::vector<std::string> hosts{""};
  size_t pos = 0;
  while (pos < entry.size()) {
    const size_t open = entry.find('[', pos);
    const std::string literal = entry.substr(pos, open == std::string::npos ? std::string::npos
                                                                             : open - pos);
    if (literal.find(']') != std::string::npos) ctx.fail("a ']' has no matching '['");
    for (auto& h : hosts) h += literal;
    if (open == std::string::npos) break;
    const size_t close = entry.find(']', open);
    if (close == std::string::npos) ctx.fail("a '[' has no matching ']'");
    const std::string body = entry.substr(open + 1, close - open - 1);
    if (body.find('[') != std::string::npos) ctx.fail("brackets cannot nest");
    const auto numbers = expand_group(body, ctx);
    std::vector<std::string> next;
    for (const auto& h : hosts)
      for (const auto& n : numbers) next.push_back(h + n);
    hosts = std::move(next);
    pos = close + 1;
  }
  return hosts;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& text, const std::string& variable) {
  const Context ctx{text, variable};
  if (text.empty()) ctx.fail("the host list is empty");
  std::vector<std::string> hosts;
  size_t start = 0, depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') {
      if (depth == 0) ctx.fail("a ']' has no matching '['");
      --depth;
    }
    if (c == ',' && depth == 0) {
      for (auto& h : expand_entry(text.substr(start, i - start), ctx)) hosts.push_back(std::move(h));
      start = i + 1;
    }
  }
  if (depth != 0) ctx.fail("a '[' has no matching ']'");
  return hosts;
}

std::string rank_list(const std::vector<int>& ranks) {
  const std::set<int> distinct(ranks.begin(), ranks.end());
  if (distinct.empty()) return "no rank";
  const std::string text = core::format_rank_list({distinct.begin(), distinct.end()});
  return (distinct.size() == 1 ? "rank " : "ranks ") + text;
}

}  // namespace ppctl::comm
