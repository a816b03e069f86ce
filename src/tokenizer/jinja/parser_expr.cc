// Expression parsing: precedence climbing as in jinja2.parser.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser_internal.h"

namespace tq::jinja {

ExprPtr Parser::ParseTuple(bool simplified, bool with_condexpr,
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

ExprPtr Parser::ParseExpression(bool with_condexpr) {
  DepthGuard guard(*this, cur());
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

ExprPtr Parser::ParseCondExpr() {
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

ExprPtr Parser::ParseOr() {
  ExprPtr l = ParseAnd();
  while (IsName("or")) {
    auto e = Make(ExprKind::kOr, next());
    e->a = std::move(l);
    e->b = ParseAnd();
    l = std::move(e);
  }
  return l;
}

ExprPtr Parser::ParseAnd() {
  ExprPtr l = ParseNot();
  while (IsName("and")) {
    auto e = Make(ExprKind::kAnd, next());
    e->a = std::move(l);
    e->b = ParseNot();
    l = std::move(e);
  }
  return l;
}

ExprPtr Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(*this, cur());
    auto e = Make(ExprKind::kNot, next());
    e->a = ParseNot();
    return e;
  }
  return ParseCompare();
}

ExprPtr Parser::ParseCompare() {
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

ExprPtr Parser::Binary(BinOp op, const Token& t, ExprPtr l, ExprPtr r) {
  auto e = Make(ExprKind::kBinary, t);
  e->bin_op = op;
  e->a = std::move(l);
  e->b = std::move(r);
  return e;
}

ExprPtr Parser::ParseMath1() {
  ExprPtr l = ParseConcat();
  while (IsOp("+") || IsOp("-")) {
    const Token& t = next();
    l = Binary(t.text == "+" ? BinOp::kAdd : BinOp::kSub, t, std::move(l), ParseConcat());
  }
  return l;
}

ExprPtr Parser::ParseConcat() {
  ExprPtr l = ParseMath2();
  while (IsOp("~")) {
    const Token& t = next();
    l = Binary(BinOp::kConcat, t, std::move(l), ParseMath2());
  }
  return l;
}

ExprPtr Parser::ParseMath2() {
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

ExprPtr Parser::ParsePow() {
  ExprPtr l = ParseUnary(true);
  while (IsOp("**")) {
    const Token& t = next();
    l = Binary(BinOp::kPow, t, std::move(l), ParseUnary(true));
  }
  return l;
}

ExprPtr Parser::ParseUnary(bool with_filter) {
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

ExprPtr Parser::ParsePrimary() {
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

ExprPtr Parser::Const(const Token& t, Value v) {
  auto e = Make(ExprKind::kConst, t);
  e->constant = std::move(v);
  return e;
}

ExprPtr Parser::ParseList() {
  auto e = Make(ExprKind::kList, next());
  while (!IsOp("]")) {
    if (!e->items.empty()) ExpectOp(",");
    if (IsOp("]")) break;
    e->items.push_back(ParseExpression(true));
  }
  ExpectOp("]");
  return e;
}

ExprPtr Parser::ParseDict() {
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

ExprPtr Parser::ParsePostfix(ExprPtr node) {
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

ExprPtr Parser::ParseFilterExpr(ExprPtr node) {
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

ExprPtr Parser::ParseSubscript(ExprPtr node) {
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

ExprPtr Parser::ParseSubscribed() {
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

ArgList Parser::ParseCallArgs() {
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

ExprPtr Parser::ParseCall(ExprPtr node) {
  auto e = std::make_unique<Expr>(ExprKind::kCall, node->pos);  // errors point at the callee
  e->args = ParseCallArgs();
  e->a = std::move(node);
  return e;
}

std::string Parser::DottedName() {
  std::string name = ExpectName().text;
  while (IsOp(".")) {
    next();
    name += "." + ExpectName().text;
  }
  return name;
}

// `| name(args) | ...`; with `start_inline` the first `|` is absent ({% filter %}).
ExprPtr Parser::ParseFilter(ExprPtr node, bool start_inline) {
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

ExprPtr Parser::ParseTest(ExprPtr node) {
  const Token& is = next();
  const bool negated = SkipName("not");
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

}  // namespace tq::jinja
