// Statement parsing (jinja2.parser): tags, bodies, assignment targets.
#include "tokenizer/jinja/parser.h"

#include "tokenizer/jinja/parser_internal.h"

namespace tq::jinja {

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

// Parses template data and tags until a block tag whose name is in `end` (the block_begin is
// consumed, the name is left as current) or the end of input.
Body Parser::Subparse(const std::vector<std::string_view>& end) {
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
Body Parser::ParseStatements(const std::vector<std::string_view>& end, bool drop_needle) {
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

StmtPtr Parser::ParseStatement() {
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

StmtPtr Parser::ParseIf() {
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

StmtPtr Parser::ParseFor() {
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

StmtPtr Parser::ParseSet() {
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

std::shared_ptr<MacroDef> Parser::ParseSignature(std::string name) {
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

Body Parser::ParseMacroBody(const char* end_tag, MacroDef& m) {
  const int saved = loop_depth_;
  loop_depth_ = 0;  // break/continue cannot cross a macro
  Body body = ParseStatements({end_tag}, true);
  loop_depth_ = saved;
  ScanSpecialNames(body, m);
  return body;
}

StmtPtr Parser::ParseMacro() {
  auto s = std::make_unique<Stmt>(StmtKind::kMacro, PosOf(next()));
  const Token& name = ExpectName();
  s->macro = ParseSignature(name.text);
  s->macro->body = ParseMacroBody("endmacro", *s->macro);
  return s;
}

StmtPtr Parser::ParseCallBlock() {
  auto s = std::make_unique<Stmt>(StmtKind::kCallBlock, PosOf(next()));
  s->macro = IsOp("(") ? ParseSignature("caller") : std::make_shared<MacroDef>();
  s->macro->name = "caller";
  s->expr = ParseExpression(true);
  if (s->expr->kind != ExprKind::kCall) Fail(cur(), "expected call");
  s->macro->body = ParseMacroBody("endcall", *s->macro);
  return s;
}

StmtPtr Parser::ParseFilterBlock() {
  auto s = std::make_unique<Stmt>(StmtKind::kFilterBlock, PosOf(next()));
  s->expr = ParseFilter(nullptr, true);
  s->body = ParseStatements({"endfilter"}, true);
  return s;
}

StmtPtr Parser::ParseWith() {
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

Target Parser::ParseAssignTarget(bool with_tuple, bool with_namespace,
                                 const std::vector<std::string_view>& extra_end) {
  if (with_namespace && cur().type == Tok::kName && look().type == Tok::kOp && look().text == ".") {
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

Target Parser::ParseTargetPrimary() {
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

bool Parser::IsTupleEnd(const std::vector<std::string_view>& extra_end) const {
  const Token& t = cur();
  if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || (t.type == Tok::kOp && t.text == ")"))
    return true;
  if (t.type == Tok::kName)
    for (auto e : extra_end)
      if (t.text == e) return true;
  return false;
}

Body Parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).ParseTemplate(); }

}  // namespace tq::jinja
