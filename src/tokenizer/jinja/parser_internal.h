// Internal to the parser: the Parser class, whose statement methods live in parser.cc and
// expression methods in parser_expr.cc, and the compile-time passes of parse_checks.cc.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace tq::jinja {

// How a token is named in error messages ("end of print statement", a name, an operator).
std::string Describe(const Token& t);

// Turns on MacroDef::uses_varargs/uses_kwargs/uses_caller for names used in a macro body.
void ScanSpecialNames(const Body& body, MacroDef& m);

// Unknown filters and tests fail at compile time, as in Jinja, except inside `if` statements
// and inline-if expressions ("soft" frames): there they fail only when evaluated. Bodies of
// loops, macros, call/filter/set blocks are new frames, never soft.
void CheckBody(const Body& body, bool soft);

// Jinja's symbol analysis (idtracking.py): fills Stmt::shadow / MacroDef::shadow for every frame
// and returns the root frame's list.
std::vector<std::string> AnalyzeScopes(Body& root);

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body ParseTemplate() {
    Body body = Subparse({});
    if (cur().type != Tok::kEof) Fail(cur(), fmt::format("unexpected '{}'", Describe(cur())));
    CheckBody(body, false);
    // The root frame is a scope of its own, with its shadowed names.
    auto root = std::make_unique<Stmt>(StmtKind::kScope, Pos{1, 1});
    root->shadow = AnalyzeScopes(body);
    root->body = std::move(body);
    Body out;
    out.push_back(std::move(root));
    return out;
  }

 private:
  // --- token stream -------------------------------------------------------------------------
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  static Pos PosOf(const Token& t) { return {t.line, t.col}; }
  bool IsOp(std::string_view op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool IsName(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    next();
    return true;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void Fail(const Token& t, std::string msg) const {
    throw RenderError{std::move(msg), t.line, t.col};
  }
  const Token& ExpectOp(std::string_view op) {
    if (!IsOp(op)) Fail(cur(), fmt::format("expected token '{}', got '{}'", op, Describe(cur())));
    return next();
  }
  const Token& ExpectName() {
    if (cur().type != Tok::kName)
      Fail(cur(), fmt::format("expected token 'name', got '{}'", Describe(cur())));
    return next();
  }
  void ExpectName(std::string_view n) {
    if (!IsName(n)) Fail(cur(), fmt::format("expected token '{}', got '{}'", n, Describe(cur())));
    next();
  }
  void Expect(Tok type, const char* what) {
    if (cur().type != type)
      Fail(cur(), fmt::format("expected token '{}', got '{}'", what, Describe(cur())));
    next();
  }

  struct DepthGuard {
    DepthGuard(Parser& p, const Token& t) : p(p) {
      if (++p.depth_ > kMaxParseDepth) p.Fail(t, "template nesting is too deep");
    }
    ~DepthGuard() { --p.depth_; }
    Parser& p;
  };

  // --- statements ---------------------------------------------------------------------------
  // Parses template data and tags until a block tag whose name is in `end` (the block_begin is
  // consumed, the name is left as current) or the end of input.
  Body Subparse(const std::vector<std::string_view>& end);
  // `%}` then the body up to one of `end`; fails at the end of input naming the open block.
  Body ParseStatements(const std::vector<std::string_view>& end, bool drop_needle);
  StmtPtr ParseStatement();
  StmtPtr ParseIf();
  StmtPtr ParseFor();
  StmtPtr ParseSet();
  std::shared_ptr<MacroDef> ParseSignature(std::string name);
  Body ParseMacroBody(const char* end_tag, MacroDef& m);
  StmtPtr ParseMacro();
  StmtPtr ParseCallBlock();
  StmtPtr ParseFilterBlock();
  StmtPtr ParseWith();

  // --- assignment targets -------------------------------------------------------------------
  Target ParseAssignTarget(bool with_tuple, bool with_namespace,
                           const std::vector<std::string_view>& extra_end);
  Target ParseTargetPrimary();
  bool IsTupleEnd(const std::vector<std::string_view>& extra_end) const;

  // --- expressions --------------------------------------------------------------------------
  ExprPtr Make(ExprKind k, const Token& t) { return std::make_unique<Expr>(k, PosOf(t)); }
  ExprPtr ParseTuple(bool simplified, bool with_condexpr,
                     const std::vector<std::string_view>& extra_end, bool explicit_parens);
  ExprPtr ParseExpression(bool with_condexpr);
  ExprPtr ParseCondExpr();
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr Binary(BinOp op, const Token& t, ExprPtr l, ExprPtr r);
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr Const(const Token& t, Value v);
  ExprPtr ParseList();
  ExprPtr ParseDict();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseFilterExpr(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node);
  ExprPtr ParseSubscribed();
  ArgList ParseCallArgs();
  ExprPtr ParseCall(ExprPtr node);
  std::string DottedName();
  // `| name(args) | ...`; with `start_inline` the first `|` is absent ({% filter %}).
  ExprPtr ParseFilter(ExprPtr node, bool start_inline);
  ExprPtr ParseTest(ExprPtr node);

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
};

}  // namespace tq::jinja
