// Compile-time passes over the parsed tree.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser_internal.h"

namespace tq::jinja {
namespace {

// Names used in a macro body that turn on Jinja's extra macro arguments.
void ScanExpr(const Expr* e, MacroDef& m) {
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

}  // namespace

void ScanSpecialNames(const Body& body, MacroDef& m) {
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

}  // namespace tq::jinja
