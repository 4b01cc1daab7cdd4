// The template parser: tokens to Program, with jinja2's grammar and operator precedence (jinja2/parser.py),
// refusing what the sandbox or the subset leaves out.
#include <algorithm>
#include <set>

#include "jinja/ast.hpp"
#include "jinja/builtins.hpp"
#include "jinja/lexer.hpp"

namespace ppctl::jinja {
namespace {

using TK = Token::Kind;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin, int max_depth)
      : toks_(std::move(tokens)), origin_(origin), max_depth_(max_depth) {}

  Program program() {
    Program p;
    std::string end;
    p.body = body({}, &end);
    return p;
  }

 private:
  /// Counts nesting (blocks, parenthesised and operand expressions) against Limits::max_depth.
  struct Deeper {
    Parser& p;
    explicit Deeper(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_depth_) {
        p.fail("template nests deeper than the limit max_depth = " + std::to_string(p.max_depth_));
      }
    }
    ~Deeper() { --p.depth_; }
  };

  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(origin_, peek().line, message); }
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).kind == TK::Operator && peek(ahead).text == op; }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TK::Name && peek(ahead).text == name;
  }
  bool accept_op(const char* op) { return is_op(op) ? (next(), true) : false; }
  bool accept_name(const char* name) { return is_name(name) ? (next(), true) : false; }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::End: return "end of template";
      case TK::BlockEnd: return "end of statement block";
      case TK::VarEnd: return "end of print statement";
      case TK::String: return "string";
      case TK::Integer: case TK::Float: return "number " + t.text;
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(peek()));
  }
  std::string expect_identifier() {
    if (peek().kind != TK::Name) fail("expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != TK::BlockEnd) fail("expected end of statement block, got " + describe(peek()));
    next();
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  /// Adds an operand, keeping `height` (the evaluator's recursion) within max_depth.
  void add(Expr& e, ExprPtr child) {
    if (child) {
      e.height = std::max(e.height, child->height + 1);
      if (e.height > max_depth_) {
        fail("expression nests deeper than the limit max_depth = " + std::to_string(max_depth_));
      }
    }
    e.args.push_back(std::move(child));
  }
  ExprPtr binary(Expr::Kind kind, const std::string& op, ExprPtr left, ExprPtr right) {
    auto e = make(kind, left->line);
    e->name = op;
    add(*e, std::move(left));
    add(*e, std::move(right));
    return e;
  }

  // ---- statements ----

  /// Statements up to a block tag whose name is in `ends` (left unread; its name in *end), or the end.
  Body body(const std::set<std::string>& ends, std::string* end) {
    Deeper guard(*this);
    Body out;
    while (true) {
      const Token& t = peek();
      if (t.kind == TK::End) {
        if (!ends.empty()) {
          const auto closing = std::find_if(ends.begin(), ends.end(), [](const std::string& w) { return w.rfind("end", 0) == 0; });
          fail("unexpected end of template: expected '{% " + (closing == ends.end() ? *ends.begin() : *closing) + " %}'");
        }
        return out;
      }
      if (t.kind == TK::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->line = t.line;
        n->text = next().text;
        out.push_back(std::move(n));
      } else if (t.kind == TK::VarBegin) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->line = t.line;
        n->expr = tuple_expr();
        if (peek().kind != TK::VarEnd) fail("expected end of print statement '}}', got " + describe(peek()));
        next();
        out.push_back(std::move(n));
      } else {
        next();  // BlockBegin
        if (peek().kind != TK::Name) fail("expected a statement name after '{%', got " + describe(peek()));
        const std::string& word = peek().text;
        if (ends.count(word)) {
          *end = word;
          return out;
        }
        out.push_back(statement());
      }
    }
  }

  NodePtr statement() {
    const Token& t = next();
    const std::string word = t.text;
    auto n = std::make_unique<Node>();
    n->line = t.line;
    if (word == "if") return if_statement(std::move(n));
    if (word == "for") return for_statement(std::move(n));
    if (word == "set") return set_statement(std::move(n));
    if (word == "macro") return macro_statement(std::move(n));
    if (word == "call") return call_statement(std::move(n));
    if (word == "generation") {
      n->kind = Node::Kind::Generation;
      expect_block_end();
      n->body = closed_body("endgeneration");
      return n;
    }
    if (word == "break" || word == "continue") {
      if (loops_ == 0) fail("'{% " + word + " %}' outside a for loop");
      n->kind = word == "break" ? Node::Kind::Break : Node::Kind::Continue;
      expect_block_end();
      return n;
    }
    static const std::set<std::string> no_files = {"include", "import", "from", "extends"};
    if (no_files.count(word)) {
      --pos_;
      fail("'{% " + word + " %}' is not allowed: a chat template has no access to files or other templates");
    }
    --pos_;
    static const std::set<std::string> known = {"block", "filter", "with", "raw", "autoescape", "do", "trans"};
    if (known.count(word)) fail("'{% " + word + " %}' is not supported by ppctl's chat-template engine");
    fail("unknown statement '{% " + word + " %}' (or a closing tag without its opening one)");
  }

  Body closed_body(const std::string& end_word) {
    std::string end;
    Body b = body({end_word}, &end);
    next();
    expect_block_end();
    return b;
  }

  NodePtr if_statement(NodePtr n) {
    n->kind = Node::Kind::If;
    ExprPtr cond = tuple_expr();
    while (true) {
      expect_block_end();
      std::string end;
      Body b = body({"elif", "else", "endif"}, &end);
      n->branches.emplace_back(std::move(cond), std::move(b));
      next();
      if (end == "elif") {
        cond = tuple_expr();
        continue;
      }
      if (end == "else") {
        expect_block_end();
        n->branches.emplace_back(nullptr, closed_body("endif"));
        return n;
      }
      expect_block_end();
      return n;
    }
  }

  NodePtr for_statement(NodePtr n) {
    n->kind = Node::Kind::For;
    do {
      n->targets.push_back(expect_identifier());
    } while (accept_op(","));
    if (!accept_name("in")) fail("expected 'in' in a for loop, got " + describe(peek()));
    n->expr = tuple_expr(/*with_condexpr=*/false);
    if (accept_name("if")) n->filter = expression();
    if (is_name("recursive")) fail("'{% for ... recursive %}' is not supported by ppctl's chat-template engine");
    expect_block_end();
    ++loops_;
    std::string end;
    n->body = body({"else", "endfor"}, &end);
    --loops_;
    next();
    expect_block_end();
    if (end == "else") n->else_body = closed_body("endfor");
    return n;
  }

  NodePtr set_statement(NodePtr n) {
    n->kind = Node::Kind::Set;
    do {
      n->targets.push_back(expect_identifier());
      if (n->targets.size() == 1 && accept_op(".")) n->attr = expect_identifier();
    } while (n->attr.empty() && accept_op(","));
    if (accept_op("=")) {
      n->expr = tuple_expr();
      expect_block_end();
      return n;
    }
    if (n->targets.size() != 1 || !n->attr.empty()) fail("a block set takes one name: '{% set NAME %}'");
    if (peek().kind == TK::Operator && peek().text == "|") fail("'{% set NAME | filter %}' is not supported");
    expect_block_end();
    n->body = closed_body("endset");
    return n;
  }

  void signature(Node& n) {
    if (!accept_op("(")) return;
    while (!accept_op(")")) {
      if (!n.params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string param = expect_identifier();
      ExprPtr def = accept_op("=") ? expression() : nullptr;
      n.params.emplace_back(std::move(param), std::move(def));
    }
  }

  NodePtr macro_statement(NodePtr n) {
    n->kind = Node::Kind::Macro;
    n->name = expect_identifier();
    if (!is_op("(")) fail("expected '(' after the macro name, got " + describe(peek()));
    signature(*n);
    expect_block_end();
    const int loops = loops_;
    loops_ = 0;  // break/continue do not reach out of a macro
    n->body = closed_body("endmacro");
    loops_ = loops;
    return n;
  }

  NodePtr call_statement(NodePtr n) {
    n->kind = Node::Kind::CallBlock;
    signature(*n);
    n->expr = expression();
    if (n->expr->kind != Expr::Kind::Call) fail("expected a call after '{% call %}'");
    expect_block_end();
    n->body = closed_body("endcall");
    return n;
  }

  // ---- expressions (jinja2's precedence, loosest first) ----

  /// An expression, or a tuple of them without parentheses (`a, b`).
  ExprPtr tuple_expr(bool with_condexpr = true) {
    const int line = peek().line;
    ExprPtr first = with_condexpr ? expression() : or_expr();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::TupleLit, line);
    add(*t, std::move(first));
    while (accept_op(",")) {
      if (peek().kind == TK::BlockEnd || peek().kind == TK::VarEnd || is_name("in") || is_op(")")) break;
      add(*t, with_condexpr ? expression() : or_expr());
    }
    return t;
  }

  ExprPtr expression() {
    Deeper guard(*this);
    ExprPtr e = or_expr();
    while (is_name("if")) {
      next();
      auto c = make(Expr::Kind::Cond, e->line);
      add(*c, std::move(e));
      add(*c, or_expr());
      add(*c, accept_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  /// operand (op operand)*, left-associative, for the operators (or keywords) in `ops`.
  ExprPtr left_assoc(ExprPtr (Parser::*operand)(), std::initializer_list<const char*> ops, Expr::Kind kind) {
    ExprPtr e = (this->*operand)();
    while (true) {
      const auto op = std::find_if(ops.begin(), ops.end(), [&](const char* o) {
        return kind == Expr::Kind::Binary ? is_op(o) : is_name(o);
      });
      if (op == ops.end()) return e;
      next();
      e = binary(kind, *op, std::move(e), (this->*operand)());
    }
  }

  ExprPtr or_expr() { return left_assoc(&Parser::and_expr, {"or"}, Expr::Kind::Or); }
  ExprPtr and_expr() { return left_assoc(&Parser::not_expr, {"and"}, Expr::Kind::And); }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Deeper guard(*this);
      auto n = make(Expr::Kind::Not, next().line);
      add(*n, not_expr());
      return n;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr first = math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rest;
    while (true) {
      std::string op;
      if (peek().kind == TK::Operator &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      ops.push_back(op);
      rest.push_back(math1());
    }
    if (ops.empty()) return first;
    auto c = make(Expr::Kind::Compare, first->line);
    add(*c, std::move(first));
    for (auto& r : rest) add(*c, std::move(r));
    c->ops = std::move(ops);
    return c;
  }

  ExprPtr math1() { return left_assoc(&Parser::concat, {"+", "-"}, Expr::Kind::Binary); }
  ExprPtr concat() { return left_assoc(&Parser::math2, {"~"}, Expr::Kind::Binary); }
  ExprPtr math2() { return left_assoc(&Parser::power, {"*", "/", "//", "%"}, Expr::Kind::Binary); }
  ExprPtr power() { return left_assoc(&Parser::unary_filtered, {"**"}, Expr::Kind::Binary); }
  ExprPtr unary_filtered() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Deeper guard(*this);
      auto u = make(Expr::Kind::Unary, peek().line);
      u->name = next().text;
      add(*u, unary(false));
      e = std::move(u);
    } else {
      e = postfix(primary());
    }
    if (with_filter) return filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    auto lit = [&](Value v) {
      auto e = make(Expr::Kind::Literal, t.line);
      e->literal = std::move(v);
      next();
      return e;
    };
    switch (t.kind) {
      case TK::Name:
        if (t.text == "true" || t.text == "True") return lit(Value::from(true));
        if (t.text == "false" || t.text == "False") return lit(Value::from(false));
        if (t.text == "none" || t.text == "None") return lit(Value::none());
        {
          auto e = make(Expr::Kind::Name, t.line);
          e->name = next().text;
          return e;
        }
      case TK::String: {
        std::string s = t.text;
        next();
        while (peek().kind == TK::String) s += next().text;  // adjacent literals join, as in Python
        auto e = make(Expr::Kind::Literal, t.line);
        e->literal = Value::from(std::move(s));
        return e;
      }
      case TK::Integer: return lit(Value::from(t.integer));
      case TK::Float: return lit(Value::from(t.real));
      case TK::Operator:
        if (t.text == "(") {
          Deeper guard(*this);
          next();
          if (accept_op(")")) return make(Expr::Kind::TupleLit, t.line);
          ExprPtr e = tuple_expr();
          expect_op(")");
          return e;
        }
        if (t.text == "[") return sequence(Expr::Kind::ListLit, "]");
        if (t.text == "{") return sequence(Expr::Kind::DictLit, "}");
        [[fallthrough]];
      default: fail("unexpected " + describe(t));
    }
  }

  ExprPtr sequence(Expr::Kind kind, const char* close) {
    Deeper guard(*this);
    auto e = make(kind, next().line);
    while (!accept_op(close)) {
      if (!e->args.empty()) {
        expect_op(",");
        if (accept_op(close)) break;
      }
      add(*e, expression());
      if (kind == Expr::Kind::DictLit) {
        expect_op(":");
        add(*e, expression());
      }
    }
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const int line = next().line;
        auto a = make(Expr::Kind::Attr, line);
        const Token& t = next();
        if (t.kind != TK::Name && t.kind != TK::Integer) fail("expected an attribute name after '.', got " + describe(t));
        a->name = t.text;
        add(*a, std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr object) {
    Deeper guard(*this);
    const int line = next().line;
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (accept_op(":")) {
        if (++colons > 2) fail("a slice takes at most start:stop:step");
        continue;
      }
      if (parts[colons]) fail("expected ']' or ':' in a subscript, got " + describe(peek()));
      parts[colons] = expression();
    }
    next();
    if (colons == 0 && !parts[0]) fail("empty subscript '[]'");
    auto e = make(colons ? Expr::Kind::Slice : Expr::Kind::Item, line);
    add(*e, std::move(object));
    add(*e, std::move(parts[0]));
    if (colons) {
      add(*e, std::move(parts[1]));
      add(*e, std::move(parts[2]));
    }
    return e;
  }

  /// `(args)` after a callee, filter or test: positional, then keyword arguments.
  void arguments(Expr& e) {
    Deeper guard(*this);
    expect_op("(");
    while (!accept_op(")")) {
      if (e.args.size() > 1 || !e.keywords.empty()) {
        expect_op(",");
        if (accept_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail("'*args' and '**kwargs' in calls are not supported");
      if (peek().kind == TK::Name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        ExprPtr value = expression();
        e.height = std::max(e.height, value->height + 1);
        e.keywords.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e.keywords.empty()) fail("a positional argument follows a keyword argument");
        add(e, expression());
      }
    }
  }

  ExprPtr call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, callee->line);
    add(*c, std::move(callee));
    arguments(*c);
    return c;
  }

  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        next();
        auto f = make(Expr::Kind::Filter, peek().line);
        f->name = expect_identifier();
        if (!has_filter(f->name)) {
          --pos_;
          fail("no filter named '" + f->name + "' (not in ppctl's chat-template subset)");
        }
        add(*f, std::move(e));
        if (is_op("(")) arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        next();
        auto t = make(Expr::Kind::Test, peek().line);
        t->negated = accept_name("not");
        t->name = expect_identifier();
        if (!has_test(t->name)) {
          --pos_;
          fail("no test named '" + t->name + "' (not in ppctl's chat-template subset)");
        }
        add(*t, std::move(e));
        const Token& a = peek();
        if (is_op("(")) {
          arguments(*t);
        } else if ((a.kind == TK::Name && a.text != "else" && a.text != "or" && a.text != "and" && a.text != "if" &&
                    a.text != "is" && a.text != "in" && a.text != "not") ||
                   a.kind == TK::String || a.kind == TK::Integer || a.kind == TK::Float || is_op("[") || is_op("{")) {
          add(*t, postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  const std::string& origin_;
  int max_depth_;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Program parse(std::string_view source, const std::string& origin, int max_depth) {
  return Parser(lex(source, origin), origin, max_depth).program();
}

}  // namespace ppctl::jinja
