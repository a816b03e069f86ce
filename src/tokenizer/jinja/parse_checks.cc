// Compile-time passes over the parsed tree.
#include <map>
#include <set>

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

namespace tq::jinja {
namespace {

// One frame's symbols, as jinja2.idtracking.Symbols tracks them: how each name the frame
// refers to gets its first value.
class FrameSymbols {
 public:
  enum class Load { kResolve, kUndefined, kParam, kAlias };

  explicit FrameSymbols(const std::set<std::string>* outer) : outer_(outer) {}

  void LoadName(const std::string& n) {
    if (!refs_.count(n) && !OuterHas(n)) refs_[n] = Load::kResolve;
  }
  void Store(const std::string& n) {
    stores_.insert(n);
    if (!refs_.count(n)) refs_[n] = OuterHas(n) ? Load::kAlias : Load::kUndefined;
  }
  void Param(const std::string& n) {
    stores_.insert(n);
    refs_[n] = Load::kParam;
  }
  void StoreTarget(const Target& t) {
    if (!t.attr.empty()) return LoadName(t.name);  // ns.attr = ... reads ns
    if (!t.is_tuple) return Store(t.name);
    for (const Target& x : t.items) StoreTarget(x);
  }
  void ParamTarget(const Target& t) {
    if (!t.is_tuple) return Param(t.name);
    for (const Target& x : t.items) ParamTarget(x);
  }

  void Expr(const jinja::Expr* e) {
    if (!e) return;
    if (e->kind == ExprKind::kName) LoadName(e->name);
    for (auto& x : e->items) Expr(x.get());
    Expr(e->a.get());
    Expr(e->b.get());
    Expr(e->c.get());
    for (auto& x : e->args.pos) Expr(x.get());
    for (auto& x : e->args.kw) Expr(x.second.get());
    Expr(e->args.star.get());
    Expr(e->args.star_star.get());
    for (auto& x : e->cmp) Expr(x.second.get());
  }

  // The statements of this frame; bodies that open frames of their own are queued in `children`
  // to be analysed once this frame is complete.
  void Body(jinja::Body& body, std::vector<Stmt*>& children) {
    for (auto& s : body) Statement(*s, children);
  }

  void Statement(Stmt& s, std::vector<Stmt*>& children) {
    switch (s.kind) {
      case StmtKind::kOutput:
        Expr(s.expr.get());
        break;
      case StmtKind::kIf:
        If(s, 0, children);
        break;
      case StmtKind::kFor:
        Expr(s.expr.get());
        children.push_back(&s);
        break;
      case StmtKind::kSet:
        Expr(s.expr.get());
        StoreTarget(s.target);
        break;
      case StmtKind::kSetBlock:
        StoreTarget(s.target);
        children.push_back(&s);
        break;
      case StmtKind::kMacro:
        Store(s.macro->name);
        children.push_back(&s);
        break;
      case StmtKind::kCallBlock:
      case StmtKind::kFilterBlock:
        Expr(s.expr.get());
        children.push_back(&s);
        break;
      case StmtKind::kWith:
        for (auto& a : s.assigns) Expr(a.second.get());
        children.push_back(&s);
        break;
      case StmtKind::kScope:
        children.push_back(&s);
        break;
      default:
        break;
    }
  }

  // if/elif/else: each branch is analysed on a copy and merged (Symbols.branch_update): a name
  // first assigned inside a branch is resolved from the render variables, not left undefined.
  void If(Stmt& s, size_t i, std::vector<Stmt*>& children) {
    Expr(s.tests[i].get());
    std::vector<FrameSymbols> branches;
    branches.push_back(Branch([&](FrameSymbols& b) { b.Body(s.bodies[i], children); }));
    if (i + 1 < s.tests.size()) {
      branches.push_back(Branch([&](FrameSymbols& b) { b.If(s, i + 1, children); }));
    } else {
      branches.push_back(*this);
      if (s.bodies.size() > s.tests.size()) branches.back().Body(s.bodies.back(), children);
    }
    std::set<std::string> new_stores;
    for (auto& b : branches)
      for (auto& n : b.stores_)
        if (!stores_.count(n)) new_stores.insert(n);
    for (auto& b : branches) {
      for (auto& [n, l] : b.refs_) refs_[n] = l;
      stores_.insert(b.stores_.begin(), b.stores_.end());
    }
    for (auto& n : new_stores) refs_[n] = OuterHas(n) ? Load::kAlias : Load::kResolve;
  }

  template <typename F>
  FrameSymbols Branch(F&& visit) {
    FrameSymbols copy = *this;
    visit(copy);
    return copy;
  }

  std::vector<std::string> Shadowed() const {
    std::vector<std::string> out;
    for (auto& [n, l] : refs_)
      if (l == Load::kUndefined) out.push_back(n);
    return out;
  }

  std::set<std::string> AllRefs() const {
    std::set<std::string> out = outer_ ? *outer_ : std::set<std::string>();
    for (auto& kv : refs_) out.insert(kv.first);
    return out;
  }

 private:
  bool OuterHas(const std::string& n) const { return outer_ && outer_->count(n); }

  const std::set<std::string>* outer_;
  std::map<std::string, Load> refs_;
  std::set<std::string> stores_;
};

void AnalyzeChildren(const std::vector<Stmt*>& children, const std::set<std::string>& refs);

// Analyses one frame: `params` are bound first (loop targets, macro parameters), then `body`.
std::vector<std::string> AnalyzeFrame(jinja::Body& body, const std::set<std::string>& outer,
                                      const std::vector<const Target*>& params,
                                      const std::vector<std::string>& param_names) {
  FrameSymbols sym(&outer);
  for (const Target* t : params) sym.ParamTarget(*t);
  for (const auto& n : param_names) sym.Param(n);
  std::vector<Stmt*> children;
  sym.Body(body, children);
  AnalyzeChildren(children, sym.AllRefs());
  return sym.Shadowed();
}

void AnalyzeChildren(const std::vector<Stmt*>& children, const std::set<std::string>& refs) {
  for (Stmt* s : children) {
    switch (s->kind) {
      case StmtKind::kFor:
        s->shadow = AnalyzeFrame(s->body, refs, {&s->target}, {"loop"});
        s->else_shadow = AnalyzeFrame(s->else_body, refs, {}, {});
        break;
      case StmtKind::kMacro:
      case StmtKind::kCallBlock: {
        MacroDef& m = *s->macro;
        std::vector<std::string> params = m.params;
        for (const char* special : {"varargs", "kwargs", "caller"}) params.push_back(special);
        m.shadow = AnalyzeFrame(m.body, refs, {}, params);
        break;
      }
      case StmtKind::kWith: {
        std::vector<const Target*> targets;
        for (auto& a : s->assigns) targets.push_back(&a.first);
        s->shadow = AnalyzeFrame(s->body, refs, targets, {});
        break;
      }
      default:  // set and filter blocks, scopes
        s->shadow = AnalyzeFrame(s->body, refs, {}, {});
        break;
    }
  }
}

}  // namespace

std::vector<std::string> AnalyzeScopes(Body& root) {
  static const std::set<std::string> kNone;
  return AnalyzeFrame(root, kNone, {}, {});
}

}  // namespace tq::jinja
