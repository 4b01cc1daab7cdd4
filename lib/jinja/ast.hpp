// The parsed template: expression and statement nodes, each with its source line.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.hpp"

namespace ppctl::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// One expression node. `args` holds the operands: Attr/Item: [object, key]; Slice: [object, start, stop,
/// step] (null where omitted); Call: [callee, positional...]; Filter/Test: [subject, positional...];
/// Unary/Not: [operand]; Binary/And/Or: [left, right]; Compare: [first, ...] with `ops` between them;
/// Cond: [then, condition, else or null]; ListLit/TupleLit: items; DictLit: key, value, key, value, ...
struct Expr {
  enum class Kind {
    Literal, Name, Attr, Item, Slice, Call, Filter, Test, Unary, Binary, Compare, And, Or, Not, Cond,
    ListLit, TupleLit, DictLit
  };
  Kind kind;
  int line = 0;
  int height = 1;           // 1 + the tallest operand: bounded by Limits::max_depth at parse time
  Value literal;            // Literal
  std::string name;         // Name, Attr (attribute), Filter, Test, Unary/Binary (operator)
  bool negated = false;     // Test: `is not`
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> keywords;  // Call, Filter, Test
  std::vector<std::string> ops;                           // Compare
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

/// One statement. Text: `text`; Output: `expr`; If: `branches` (condition null for else); For: `targets`,
/// `expr` (the iterable), `filter` (`if` clause), `body`, `else_body`; Set: `targets` (or `targets[0]`.`attr`)
/// = `expr`, or the rendered `body` for a block set; Macro: `name`, `params`, `body`; CallBlock: `expr` (the
/// call), `params` (caller's), `body`; Generation: `body`; Break, Continue.
struct Node {
  enum class Kind { Text, Output, If, For, Set, Macro, CallBlock, Generation, Break, Continue };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;
  Body body;
  Body else_body;
};

/// A parsed template.
struct Program {
  Body body;
};

/// Parses the tokens of `source`; throws TemplateError naming `origin`, the line and the construct on a
/// syntax error, a construct outside the subset or the sandbox, or nesting deeper than `max_depth`.
Program parse(std::string_view source, const std::string& origin, int max_depth);

}  // namespace ppctl::jinja
