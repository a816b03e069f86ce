#include "tokenizer/jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "tokenizer/jinja/builtins.h"

namespace tq::jinja {
namespace {

std::string Describe(const Token& t) {
  switch (t.type) {
    case Tok::kData:
      return "template data";
    case Tok::kVarBegin:
      return "begin of print statement";
    case Tok::kVarEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kName:
    case Tok::kOp:
      return t.text;
    case Tok::kString:
      return "string";
    case Tok::kInt:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kEof:
      return "end of template";
  }
  return "token";
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body ParseTemplate() {
    Body body = Subparse({});
    if (cur().type != Tok::kEof) Fail(cur(), fmt::format("unexpected '{}'", Describe(cur())));
    CheckBody(body, false);
    return body;
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
  Body Subparse(const std::vector<std::string_view>& end) {
    Body body;
    while (cur().type != Tok::kEof) {
      const Token& t = cur();
      if (t.type == Tok::kData) {
        auto s = std::make_unique<Stmt>(StmtKind::kData, PosOf(t));
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>(StmtKind::kOutput, PosOf(t));
        s->expr = ParseTuple(false, true, {}, false);
        Expect(Tok::kVarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        next();
        if (cur().type == Tok::kName &&
            std::find(end.begin(), end.end(), std::string_view(cur().text)) != end.end())
          return body;
        body.push_back(ParseStatement());
        Expect(Tok::kBlockEnd, "end of statement block");
      } else {
        Fail(t, fmt::format("unexpected '{}'", Describe(t)));
      }
    }
    return body;
  }

  // `%}` then the body up to one of `end`; fails at the end of input naming the open block.
  Body ParseStatements(const std::vector<std::string_view>& end, bool drop_needle) {
    SkipOp(":");
    Expect(Tok::kBlockEnd, "end of statement block");
    Body body = Subparse(end);
    if (cur().type == Tok::kEof) {
      std::string names;
      for (size_t k = 0; k < end.size(); ++k)
        names += fmt::format("{}'{}'", k == 0 ? "" : " or ", end[k]);
      Fail(cur(), fmt::format("unexpected end of template: looking for {}; the innermost block "
                              "that needs to be closed is '{}'",
                              names, tag_stack_.empty() ? "?" : tag_stack_.back()));
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr ParseStatement() {
    const Token& t = cur();
    if (t.type != Tok::kName) Fail(t, "tag name expected");
    DepthGuard guard(*this, t);
    const std::string tag = t.text;
    tag_stack_.push_back(tag);
    StmtPtr s;
    if (tag == "if") {
      s = ParseIf();
    } else if (tag == "for") {
      s = ParseFor();
    } else if (tag == "set") {
      s = ParseSet();
    } else if (tag == "macro") {
      s = ParseMacro();
    } else if (tag == "call") {
      s = ParseCallBlock();
    } else if (tag == "filter") {
      s = ParseFilterBlock();
    } else if (tag == "with") {
      s = ParseWith();
    } else if (tag == "generation") {
      next();
      s = std::make_unique<Stmt>(StmtKind::kScope, PosOf(t));
      s->body = ParseStatements({"endgeneration"}, true);
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) Fail(t, fmt::format("'{}' outside of a loop", tag));
      s = std::make_unique<Stmt>(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, PosOf(t));
      next();
    } else {
      tag_stack_.pop_back();
      if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif")
        Fail(t, fmt::format("Encountered unknown tag '{}'. Jinja was looking for a matching "
                            "block start; the innermost open block is '{}'",
                            tag, tag_stack_.empty() ? "(none)" : tag_stack_.back()));
      Fail(t, fmt::format("Encountered unknown tag '{}'", tag));
    }
    tag_stack_.pop_back();
    return s;
  }

  StmtPtr ParseIf() {
    auto s = std::make_unique<Stmt>(StmtKind::kIf, PosOf(next()));
    while (true) {
      s->tests.push_back(ParseTuple(false, false, {}, false));
      s->bodies.push_back(ParseStatements({"elif", "else", "endif"}, false));
      const Token& t = next();
      if (t.text == "elif") continue;
      if (t.text == "else") s->bodies.push_back(ParseStatements({"endif"}, true));
      break;
    }
    return s;
  }

  StmtPtr ParseFor() {
    auto s = std::make_unique<Stmt>(StmtKind::kFor, PosOf(next()));
    s->target = ParseAssignTarget(true, false, {"in"});
    ExpectName("in");
    s->expr = ParseTuple(false, false, {"recursive"}, false);
    if (SkipName("if")) s->filter = ParseExpression(true);
    if (IsName("recursive")) Fail(cur(), "recursive loops are not supported");
    ++loop_depth_;
    s->body = ParseStatements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") s->else_body = ParseStatements({"endfor"}, true);
    return s;
  }

  StmtPtr ParseSet() {
    const Token& t = next();
    Target target = ParseAssignTarget(true, true, {});
    if (SkipOp("=")) {
      auto s = std::make_unique<Stmt>(StmtKind::kSet, PosOf(t));
      s->target = std::move(target);
      s->expr = ParseTuple(false, true, {}, false);
      return s;
    }
    auto s = std::make_unique<Stmt>(StmtKind::kSetBlock, PosOf(t));
    s->target = std::move(target);
    if (IsOp("|")) s->filter = ParseFilter(nullptr, false);
    s->body = ParseStatements({"endset"}, true);
    return s;
  }

  std::shared_ptr<MacroDef> ParseSignature(std::string name) {
    auto m = std::make_shared<MacroDef>();
    m->name = std::move(name);
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!m->params.empty()) ExpectOp(",");
      const Token& p = ExpectName();
      m->params.push_back(p.text);
      if (SkipOp("=")) {
        m->defaults.push_back(ParseExpression(true));
      } else if (!m->defaults.empty()) {
        Fail(p, "non-default argument follows default argument");
      }
    }
    ExpectOp(")");
    return m;
  }

  Body ParseMacroBody(const char* end_tag, MacroDef& m) {
    const int saved = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro
    Body body = ParseStatements({end_tag}, true);
    loop_depth_ = saved;
    ScanSpecialNames(body, m);
    return body;
  }

  StmtPtr ParseMacro() {
    auto s = std::make_unique<Stmt>(StmtKind::kMacro, PosOf(next()));
    const Token& name = ExpectName();
    s->macro = ParseSignature(name.text);
    s->macro->body = ParseMacroBody("endmacro", *s->macro);
    return s;
  }

  StmtPtr ParseCallBlock() {
    auto s = std::make_unique<Stmt>(StmtKind::kCallBlock, PosOf(next()));
    s->macro = IsOp("(") ? ParseSignature("caller") : std::make_shared<MacroDef>();
    s->macro->name = "caller";
    s->expr = ParseExpression(true);
    if (s->expr->kind != ExprKind::kCall) Fail(cur(), "expected call");
    s->macro->body = ParseMacroBody("endcall", *s->macro);
    return s;
  }

  StmtPtr ParseFilterBlock() {
    auto s = std::make_unique<Stmt>(StmtKind::kFilterBlock, PosOf(next()));
    s->expr = ParseFilter(nullptr, true);
    s->body = ParseStatements({"endfilter"}, true);
    return s;
  }

  StmtPtr ParseWith() {
    auto s = std::make_unique<Stmt>(StmtKind::kWith, PosOf(next()));
    while (cur().type != Tok::kBlockEnd) {
      if (!s->assigns.empty()) ExpectOp(",");
      Target t = ParseAssignTarget(true, false, {});
      ExpectOp("=");
      s->assigns.emplace_back(std::move(t), ParseExpression(true));
    }
    s->body = ParseStatements({"endwith"}, true);
    return s;
  }

  // Names used in a macro body that turn on Jinja's extra macro arguments.
  static void ScanExpr(const Expr* e, MacroDef& m) {
    if (!e) return;
    if (e->kind == ExprKind::kName) {
      if (e->name == "varargs") m.uses_varargs = true;
      if (e->name == "kwargs") m.uses_kwargs = true;
      if (e->name == "caller") m.uses_caller = true;
    }
    for (auto& x : e->items) ScanExpr(x.get(), m);
    ScanExpr(e->a.get(), m);
    ScanExpr(e->b.get(), m);
    ScanExpr(e->c.get(), m);
    for (auto& x : e->args.pos) ScanExpr(x.get(), m);
    for (auto& x : e->args.kw) ScanExpr(x.second.get(), m);
    ScanExpr(e->args.star.get(), m);
    ScanExpr(e->args.star_star.get(), m);
    for (auto& x : e->cmp) ScanExpr(x.second.get(), m);
  }
  static void ScanSpecialNames(const Body& body, MacroDef& m) {
    for (auto& s : body) {
      ScanExpr(s->expr.get(), m);
      ScanExpr(s->filter.get(), m);
      for (auto& t : s->tests) ScanExpr(t.get(), m);
      for (auto& b : s->bodies) ScanSpecialNames(b, m);
      ScanSpecialNames(s->body, m);
      ScanSpecialNames(s->else_body, m);
      for (auto& a : s->assigns) ScanExpr(a.second.get(), m);
      if (s->macro) {  // nested macros and call blocks see the outer ones' names too
        for (auto& d : s->macro->defaults) ScanExpr(d.get(), m);
        ScanSpecialNames(s->macro->body, m);
      }
    }
  }

  // --- compile-time checks ------------------------------------------------------------------
  // Unknown filters and tests fail at compile time, as in Jinja, except inside `if` statements
  // and inline-if expressions ("soft" frames): there they fail only when evaluated.
  // Bodies of loops, macros, call/filter/set blocks are new frames, never soft.
  void CheckExpr(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == ExprKind::kCondExpr) soft = true;
    if (!soft && e->kind == ExprKind::kFilter && !FindFilter(e->name))
      throw RenderError{fmt::format("No filter named '{}'.", e->name), e->pos.line, e->pos.col};
    if (!soft && e->kind == ExprKind::kTest && !FindTest(e->name))
      throw RenderError{fmt::format("No test named '{}'.", e->name), e->pos.line, e->pos.col};
    for (auto& x : e->items) CheckExpr(x.get(), soft);
    CheckExpr(e->a.get(), soft);
    CheckExpr(e->b.get(), soft);
    CheckExpr(e->c.get(), soft);
    for (auto& x : e->args.pos) CheckExpr(x.get(), soft);
    for (auto& x : e->args.kw) CheckExpr(x.second.get(), soft);
    CheckExpr(e->args.star.get(), soft);
    CheckExpr(e->args.star_star.get(), soft);
    for (auto& x : e->cmp) CheckExpr(x.second.get(), soft);
  }

  void CheckBody(const Body& body, bool soft) {
    for (const auto& s : body) {
      switch (s->kind) {
        case StmtKind::kIf:
          for (auto& t : s->tests) CheckExpr(t.get(), true);
          for (auto& b : s->bodies) CheckBody(b, true);
          break;
        case StmtKind::kFor:
          CheckExpr(s->expr.get(), soft);
          CheckExpr(s->filter.get(), false);
          CheckBody(s->body, false);
          CheckBody(s->else_body, false);
          break;
        case StmtKind::kMacro:
        case StmtKind::kCallBlock:
          CheckExpr(s->expr.get(), soft);
          for (auto& d : s->macro->defaults) CheckExpr(d.get(), false);
          CheckBody(s->macro->body, false);
          break;
        case StmtKind::kFilterBlock:
          CheckExpr(s->expr.get(), false);
          CheckBody(s->body, false);
          break;
        case StmtKind::kSetBlock:
          CheckExpr(s->filter.get(), soft);
          CheckBody(s->body, false);
          break;
        case StmtKind::kWith:
          for (auto& a : s->assigns) CheckExpr(a.second.get(), soft);
          CheckBody(s->body, false);
          break;
        case StmtKind::kScope:
          CheckBody(s->body, false);
          break;
        default:
          CheckExpr(s->expr.get(), soft);
          break;
      }
    }
  }

  // --- assignment targets -------------------------------------------------------------------
  Target ParseAssignTarget(bool with_tuple, bool with_namespace,
                           const std::vector<std::string_view>& extra_end) {
    if (with_namespace && cur().type == Tok::kName && look().type == Tok::kOp &&
        look().text == ".") {
      Target t;
      t.name = next().text;
      next();
      t.attr = ExpectName().text;
      return t;
    }
    Target t;
    std::vector<Target> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) ExpectOp(",");
      if (IsTupleEnd(extra_end)) break;
      items.push_back(ParseTargetPrimary());
      if (with_tuple && IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (items.empty()) Fail(cur(), fmt::format("can't assign to '{}'", Describe(cur())));
    if (!is_tuple) return std::move(items[0]);
    t.is_tuple = true;
    t.items = std::move(items);
    return t;
  }

  Target ParseTargetPrimary() {
    const Token& tok = cur();
    if (tok.type == Tok::kName) {
      static const char* kConsts[] = {"true", "false", "True", "False", "none", "None"};
      for (const char* c : kConsts)
        if (tok.text == c) Fail(tok, "can't assign to 'const'");
      Target t;
      t.name = next().text;
      return t;
    }
    if (IsOp("(")) {
      next();
      Target t = ParseAssignTarget(true, false, {});
      ExpectOp(")");
      if (!t.is_tuple) return t;
      return t;
    }
    Fail(tok, fmt::format("can't assign to '{}'", Describe(tok)));
  }

  bool IsTupleEnd(const std::vector<std::string_view>& extra_end) const {
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || (t.type == Tok::kOp && t.text == ")"))
      return true;
    if (t.type == Tok::kName)
      for (auto e : extra_end)
        if (t.text == e) return true;
    return false;
  }

  // --- expressions --------------------------------------------------------------------------
  ExprPtr Make(ExprKind k, const Token& t) { return std::make_unique<Expr>(k, PosOf(t)); }

  ExprPtr ParseTuple(bool simplified, bool with_condexpr,
                     const std::vector<std::string_view>& extra_end, bool explicit_parens) {
    const Token& start = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) ExpectOp(",");
      if (IsTupleEnd(extra_end)) break;
      items.push_back(simplified ? ParsePrimary() : ParseExpression(with_condexpr));
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens)
        Fail(cur(), fmt::format("Expected an expression, got '{}'", Describe(cur())));
    }
    auto e = Make(ExprKind::kTuple, start);
    e->items = std::move(items);
    return e;
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    DepthGuard guard(*this, cur());
    return with_condexpr ? ParseCondExpr() : ParseOr();
  }

  ExprPtr ParseCondExpr() {
    ExprPtr e = ParseOr();
    while (IsName("if")) {
      auto c = Make(ExprKind::kCondExpr, next());
      c->b = std::move(e);  // value when true
      c->a = ParseOr();     // condition
      if (SkipName("else")) c->c = ParseCondExpr();
      e = std::move(c);
    }
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr l = ParseAnd();
    while (IsName("or")) {
      auto e = Make(ExprKind::kOr, next());
      e->a = std::move(l);
      e->b = ParseAnd();
      l = std::move(e);
    }
    return l;
  }

  ExprPtr ParseAnd() {
    ExprPtr l = ParseNot();
    while (IsName("and")) {
      auto e = Make(ExprKind::kAnd, next());
      e->a = std::move(l);
      e->b = ParseNot();
      l = std::move(e);
    }
    return l;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(*this, cur());
      auto e = Make(ExprKind::kNot, next());
      e->a = ParseNot();
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    const Token& start = cur();
    ExprPtr first = ParseMath1();
    std::vector<std::pair<CmpOp, ExprPtr>> ops;
    while (true) {
      CmpOp op;
      if (IsOp("==")) {
        op = CmpOp::kEq;
      } else if (IsOp("!=")) {
        op = CmpOp::kNe;
      } else if (IsOp("<")) {
        op = CmpOp::kLt;
      } else if (IsOp("<=")) {
        op = CmpOp::kLe;
      } else if (IsOp(">")) {
        op = CmpOp::kGt;
      } else if (IsOp(">=")) {
        op = CmpOp::kGe;
      } else if (IsName("in")) {
        op = CmpOp::kIn;
      } else if (IsName("not") && look().type == Tok::kName && look().text == "in") {
        next();
        op = CmpOp::kNotIn;
      } else {
        break;
      }
      next();
      ops.emplace_back(op, ParseMath1());
    }
    if (ops.empty()) return first;
    auto e = Make(ExprKind::kCompare, start);
    e->a = std::move(first);
    e->cmp = std::move(ops);
    return e;
  }

  ExprPtr Binary(BinOp op, const Token& t, ExprPtr l, ExprPtr r) {
    auto e = Make(ExprKind::kBinary, t);
    e->bin_op = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr ParseMath1() {
    ExprPtr l = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& t = next();
      l = Binary(t.text == "+" ? BinOp::kAdd : BinOp::kSub, t, std::move(l), ParseConcat());
    }
    return l;
  }

  ExprPtr ParseConcat() {
    ExprPtr l = ParseMath2();
    while (IsOp("~")) {
      const Token& t = next();
      l = Binary(BinOp::kConcat, t, std::move(l), ParseMath2());
    }
    return l;
  }

  ExprPtr ParseMath2() {
    ExprPtr l = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& t = next();
      const BinOp op = t.text == "*"    ? BinOp::kMul
                       : t.text == "/"  ? BinOp::kDiv
                       : t.text == "//" ? BinOp::kFloorDiv
                                        : BinOp::kMod;
      l = Binary(op, t, std::move(l), ParsePow());
    }
    return l;
  }

  ExprPtr ParsePow() {
    ExprPtr l = ParseUnary(true);
    while (IsOp("**")) {
      const Token& t = next();
      l = Binary(BinOp::kPow, t, std::move(l), ParseUnary(true));
    }
    return l;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(*this, cur());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const Token& t = next();
      node = Make(t.text == "-" ? ExprKind::kNeg : ExprKind::kPos, t);
      node->a = ParseUnary(false);
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    DepthGuard guard(*this, cur());
    const Token& t = cur();
    if (t.type == Tok::kName) {
      next();
      if (t.text == "true" || t.text == "True") return Const(t, Value(true));
      if (t.text == "false" || t.text == "False") return Const(t, Value(false));
      if (t.text == "none" || t.text == "None") return Const(t, Value::None());
      auto e = Make(ExprKind::kName, t);
      e->name = t.text;
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s = next().text;
      while (cur().type == Tok::kString) s += next().text;  // adjacent literals concatenate
      return Const(t, Value(std::move(s)));
    }
    if (t.type == Tok::kInt) return Const(t, Value(next().int_value));
    if (t.type == Tok::kFloat) return Const(t, Value(next().float_value));
    if (IsOp("(")) {
      next();
      ExprPtr e = ParseTuple(false, true, {}, true);
      ExpectOp(")");
      return e;
    }
    if (IsOp("[")) return ParseList();
    if (IsOp("{")) return ParseDict();
    Fail(t, fmt::format("unexpected '{}'", Describe(t)));
  }

  ExprPtr Const(const Token& t, Value v) {
    auto e = Make(ExprKind::kConst, t);
    e->constant = std::move(v);
    return e;
  }

  ExprPtr ParseList() {
    auto e = Make(ExprKind::kList, next());
    while (!IsOp("]")) {
      if (!e->items.empty()) ExpectOp(",");
      if (IsOp("]")) break;
      e->items.push_back(ParseExpression(true));
    }
    ExpectOp("]");
    return e;
  }

  ExprPtr ParseDict() {
    auto e = Make(ExprKind::kDict, next());
    while (!IsOp("}")) {
      if (!e->items.empty()) ExpectOp(",");
      if (IsOp("}")) break;
      e->items.push_back(ParseExpression(true));
      ExpectOp(":");
      e->items.push_back(ParseExpression(true));
    }
    ExpectOp("}");
    return e;
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".") || IsOp("[")) {
        node = ParseSubscript(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        node = ParseFilter(std::move(node), false);
      } else if (IsName("is")) {
        node = ParseTest(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == Tok::kName) {
        auto e = Make(ExprKind::kGetattr, t);
        e->a = std::move(node);
        e->name = attr.text;
        return e;
      }
      if (attr.type != Tok::kInt) Fail(attr, "expected name or number");
      auto e = Make(ExprKind::kGetitem, t);
      e->a = std::move(node);
      e->b = Const(attr, Value(attr.int_value));
      return e;
    }
    std::vector<ExprPtr> args;
    while (!IsOp("]")) {
      if (!args.empty()) ExpectOp(",");
      args.push_back(ParseSubscribed());
    }
    ExpectOp("]");
    auto e = Make(ExprKind::kGetitem, t);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      e->b = Make(ExprKind::kTuple, t);
      e->b->items = std::move(args);
    }
    return e;
  }

  ExprPtr ParseSubscribed() {
    const Token& start = cur();
    ExprPtr first;
    if (!IsOp(":")) {
      first = ParseExpression(true);
      if (!IsOp(":")) return first;
    }
    next();  // ':'
    auto s = Make(ExprKind::kSlice, start);
    s->a = std::move(first);
    if (!IsOp(":") && !IsOp("]") && !IsOp(",")) s->b = ParseExpression(true);
    if (SkipOp(":")) {
      if (!IsOp("]") && !IsOp(",")) s->c = ParseExpression(true);
    }
    return s;
  }

  ArgList ParseCallArgs() {
    const Token& open = ExpectOp("(");
    ArgList args;
    bool require_comma = false;
    while (!IsOp(")")) {
      if (require_comma) {
        ExpectOp(",");
        if (IsOp(")")) break;
      }
      if (IsOp("*")) {
        if (args.star || args.star_star) Fail(open, "invalid syntax for function call expression");
        next();
        args.star = ParseExpression(true);
      } else if (IsOp("**")) {
        if (args.star_star) Fail(open, "invalid syntax for function call expression");
        next();
        args.star_star = ParseExpression(true);
      } else if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == "=") {
        if (args.star_star) Fail(open, "invalid syntax for function call expression");
        std::string key = next().text;
        next();
        args.kw.emplace_back(std::move(key), ParseExpression(true));
      } else {
        if (args.star || args.star_star || !args.kw.empty())
          Fail(open, "invalid syntax for function call expression");
        args.pos.push_back(ParseExpression(true));
      }
      require_comma = true;
    }
    ExpectOp(")");
    return args;
  }

  ExprPtr ParseCall(ExprPtr node) {
    auto e = std::make_unique<Expr>(ExprKind::kCall, node->pos);  // errors point at the callee
    e->args = ParseCallArgs();
    e->a = std::move(node);
    return e;
  }

  std::string DottedName() {
    std::string name = ExpectName().text;
    while (IsOp(".")) {
      next();
      name += "." + ExpectName().text;
    }
    return name;
  }

  // `| name(args) | ...`; with `start_inline` the first `|` is absent ({% filter %}).
  ExprPtr ParseFilter(ExprPtr node, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const Token& t = cur();
      auto e = Make(ExprKind::kFilter, t);
      e->name = DottedName();
      if (IsOp("(")) e->args = ParseCallArgs();
      e->a = std::move(node);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr ParseTest(ExprPtr node) {
    const Token& is = next();
    const bool negated = SkipName("not");
    const Token& t = cur();
    auto e = Make(ExprKind::kTest, is);
    e->name = DottedName();
    if (IsOp("(")) {
      e->args = ParseCallArgs();
    } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                cur().type == Tok::kFloat || IsOp("(") || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) Fail(cur(), "You cannot chain multiple tests with is");
      e->args.pos.push_back(ParsePostfix(ParsePrimary()));
    }
    e->a = std::move(node);
    if (!negated) return e;
    auto n = Make(ExprKind::kNot, is);
    n->a = std::move(e);
    return n;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> tag_stack_;
};

}  // namespace

Body Parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).ParseTemplate(); }

}  // namespace tq::jinja
