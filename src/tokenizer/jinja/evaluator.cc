#include "tokenizer/jinja/evaluator.h"

#include <fmt/format.h>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/operators.h"

namespace tq::jinja {

struct Evaluator::MacroState : public Callable {
  std::shared_ptr<MacroDef> def;
  std::shared_ptr<Frame> closure;
  Value caller;  // for {% call %} blocks: the caller() macro passed to the callee
  Evaluator* owner = nullptr;

  Value Call(Evaluator& ev, CallArgs& args) override { return ev.CallMacro(*this, args); }
  std::string Name() const override { return "macro " + def->name; }
};

Evaluator::Evaluator(std::shared_ptr<Dict> globals, const RenderLimits& limits)
    : globals_(std::move(globals)), limits_(limits), frame_(std::make_shared<Frame>()) {}

Evaluator::~Evaluator() {
  for (auto& f : closure_frames_) f->vars.clear();
  for (auto& ns : namespaces_) ns.dict().items.clear();
}

std::string Evaluator::Render(const Body& body) { return Capture(body); }

void Evaluator::Tick() {
  if (++steps_ > limits_.max_steps)
    ThrowRender(fmt::format("template exceeded {} evaluation steps", limits_.max_steps));
}

void Evaluator::Emit(const std::string& s) {
  out_->append(s);
  if (out_->size() > limits_.max_output_bytes)
    ThrowRender(fmt::format("template output exceeds {} bytes", limits_.max_output_bytes));
}

std::string Evaluator::Capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    ExecBody(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Evaluator::Flow Evaluator::ExecBody(const Body& body) {
  for (const auto& s : body) {
    const Flow f = Exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

namespace {

// Restores the current frame on scope exit (exceptions included).
struct FrameSwap {
  FrameSwap(std::shared_ptr<Evaluator::Frame>& slot, std::shared_ptr<Evaluator::Frame> next)
      : slot(slot), saved(slot) {
    slot = std::move(next);
  }
  ~FrameSwap() { slot = saved; }
  std::shared_ptr<Evaluator::Frame>& slot;
  std::shared_ptr<Evaluator::Frame> saved;
};

std::shared_ptr<Evaluator::Frame> Child(const std::shared_ptr<Evaluator::Frame>& parent,
                                        const std::vector<std::string>& shadow = {}) {
  auto f = std::make_shared<Evaluator::Frame>();
  f->parent = parent;
  for (const std::string& n : shadow)
    f->vars[n] = Value::Undefined(fmt::format("'{}' is undefined", n));
  return f;
}

}  // namespace

Evaluator::Flow Evaluator::Exec(const Stmt& s) {
  try {
    Tick();
    switch (s.kind) {
      case StmtKind::kData:
        Emit(s.text);
        return Flow::kNormal;
      case StmtKind::kOutput:
        Emit(ToStr(Eval(*s.expr)));
        return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.bodies.size(); ++i) {
          if (i < s.tests.size() && !Truthy(Eval(*s.tests[i]))) continue;
          return ExecBody(s.bodies[i]);
        }
        return Flow::kNormal;
      case StmtKind::kFor:
        ExecFor(s);
        return Flow::kNormal;
      case StmtKind::kSet:
        Assign(s.target, Eval(*s.expr), s.pos);
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        Value v;
        {
          FrameSwap swap(frame_,
                         Child(frame_, s.shadow));  // the block is its own scope, as in Jinja
          v = Value(Capture(s.body));
        }
        if (s.filter) v = EvalFilter(*s.filter, &v);
        Assign(s.target, v, s.pos);
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        frame_->vars[s.macro->name] = MakeMacro(s.macro, Value());
        return Flow::kNormal;
      case StmtKind::kCallBlock: {
        const Expr& call = *s.expr;
        Value fn = Eval(*call.a);
        CallArgs args;
        EvalArgs(call.args, &args);
        args.kw.emplace_back("caller", MakeMacro(s.macro, Value()));
        Emit(ToStr(Call(fn, args)));
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Value body;
        {
          FrameSwap swap(frame_, Child(frame_, s.shadow));
          body = Value(Capture(s.body));
        }
        Emit(ToStr(EvalFilter(*s.expr, &body)));
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        std::vector<Value> values;
        for (auto& [t, e] : s.assigns) values.push_back(Eval(*e));
        FrameSwap swap(frame_, Child(frame_, s.shadow));
        for (size_t i = 0; i < values.size(); ++i) Assign(s.assigns[i].first, values[i], s.pos);
        return ExecBody(s.body);
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kScope: {
        FrameSwap swap(frame_, Child(frame_, s.shadow));
        return ExecBody(s.body);
      }
    }
  } catch (RenderError& e) {
    if (e.line == 0) e.line = s.pos.line, e.col = s.pos.col;
    throw;
  }
  return Flow::kNormal;
}

void Evaluator::ExecFor(const Stmt& s) {
  List items;
  try {
    items = Iterate(Eval(*s.expr));
  } catch (RenderError& e) {
    if (e.line == 0) e.line = s.expr->pos.line, e.col = s.expr->pos.col;
    throw;
  }
  if (s.filter) {
    List kept;
    for (Value& item : items) {
      Tick();
      FrameSwap swap(frame_, Child(frame_));
      Assign(s.target, item, s.pos);
      if (Truthy(Eval(*s.filter))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    FrameSwap swap(frame_, Child(frame_, s.else_shadow));
    ExecBody(s.else_body);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  const std::shared_ptr<Frame> outer = frame_;
  for (int64_t i = 0; i < n; ++i) {
    Tick();
    FrameSwap swap(frame_, Child(outer, s.shadow));
    Value loop = Value::MakeNamespace();
    Dict& d = loop.dict();
    d.items.reserve(12);
    d.Add("index", Value(i + 1));
    d.Add("index0", Value(i));
    d.Add("revindex", Value(n - i));
    d.Add("revindex0", Value(n - i - 1));
    d.Add("first", Value(i == 0));
    d.Add("last", Value(i == n - 1));
    d.Add("length", Value(n));
    d.Add("depth", Value(1));
    d.Add("depth0", Value(0));
    d.Add("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    d.Add("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    d.Add("cycle", MakeFunction("loop.cycle", [i](Evaluator&, CallArgs& a) {
            if (a.pos.empty()) ThrowRender("no items for cycling given");
            return a.pos[i % static_cast<int64_t>(a.pos.size())];
          }));
    frame_->vars["loop"] = loop;
    Assign(s.target, items[i], s.pos);
    if (ExecBody(s.body) == Flow::kBreak) break;
  }
}

Value Evaluator::Lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (const Value* v = globals_->Find(std::string_view(name))) return *v;
  return Value::Undefined(fmt::format("'{}' is undefined", name));
}

void Evaluator::Assign(const Target& t, const Value& v, const Pos& pos) {
  if (!t.attr.empty()) {
    Value ns = Lookup(t.name);
    if (ns.kind() != Kind::kNamespace)
      ThrowRender("cannot assign attribute on non-namespace object");
    ns.dict().Set(Value(t.attr), v);
    return;
  }
  if (!t.is_tuple) {
    frame_->vars[t.name] = v;
    return;
  }
  const List items = Iterate(v);
  if (items.size() != t.items.size()) {
    if (items.size() > t.items.size())
      ThrowRender(fmt::format("too many values to unpack (expected {})", t.items.size()));
    ThrowRender(fmt::format("not enough values to unpack (expected {}, got {})", t.items.size(),
                            items.size()));
  }
  for (size_t i = 0; i < items.size(); ++i) Assign(t.items[i], items[i], pos);
}

Value Evaluator::Eval(const Expr& e) {
  try {
    return EvalInner(e);
  } catch (RenderError& err) {
    if (err.line == 0) err.line = e.pos.line, err.col = e.pos.col;
    throw;
  }
}

Value Evaluator::EvalInner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.constant;
    case ExprKind::kName:
      return Lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.items.size());
      for (auto& x : e.items) items.push_back(Eval(*x));
      return e.kind == ExprKind::kList ? Value::MakeList(std::move(items))
                                       : Value::MakeTuple(std::move(items));
    }
    case ExprKind::kDict: {
      Value d = Value::MakeDict();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = Eval(*e.items[i]);
        if (k.kind() == Kind::kList || k.kind() == Kind::kDict || k.kind() == Kind::kNamespace ||
            k.is_undefined())
          ThrowRender(fmt::format("unhashable type: '{}'", TypeName(k)));
        d.dict().Set(std::move(k), Eval(*e.items[i + 1]));
      }
      return d;
    }
    case ExprKind::kGetattr:
      return GetAttr(Eval(*e.a), e.name);
    case ExprKind::kGetitem: {
      Value obj = Eval(*e.a);
      if (e.b->kind == ExprKind::kSlice) {
        const Expr& sl = *e.b;
        Value start = sl.a ? Eval(*sl.a) : Value::None();
        Value stop = sl.b ? Eval(*sl.b) : Value::None();
        Value step = sl.c ? Eval(*sl.c) : Value::None();
        // As in Jinja, slicing is plain Python subscription (no undefined fallback).
        if (obj.is_undefined()) FailUndefined(obj);
        if (obj.is_mapping()) ThrowRender("unhashable type: 'slice'");
        if (!obj.is_string() && !obj.is_sequence())
          ThrowRender(fmt::format("'{}' object is not subscriptable", TypeName(obj)));
        return SliceValue(obj, start, stop, step);
      }
      return GetItem(obj, Eval(*e.b));
    }
    case ExprKind::kSlice:
      ThrowRender("slice outside of a subscript");
    case ExprKind::kCall:
      return EvalCall(e);
    case ExprKind::kFilter:
      return EvalFilter(e, nullptr);
    case ExprKind::kTest: {
      Value v = Eval(*e.a);
      CallArgs args;
      EvalArgs(e.args, &args);
      return Value(ApplyTest(e.name, v, args));
    }
    case ExprKind::kNot:
      return Value(!Truthy(Eval(*e.a)));
    case ExprKind::kNeg:
      return Negate(Eval(*e.a));
    case ExprKind::kPos:
      return UnaryPlus(Eval(*e.a));
    case ExprKind::kBinary: {
      Value a = Eval(*e.a);
      Value b = Eval(*e.b);
      return BinaryOp(e.bin_op, a, b, limits_.max_output_bytes);
    }
    case ExprKind::kAnd: {
      Value a = Eval(*e.a);
      return Truthy(a) ? Eval(*e.b) : a;
    }
    case ExprKind::kOr: {
      Value a = Eval(*e.a);
      return Truthy(a) ? a : Eval(*e.b);
    }
    case ExprKind::kCompare: {
      Value left = Eval(*e.a);
      for (const auto& [op, rhs] : e.cmp) {
        Value right = Eval(*rhs);
        if (!CompareOp(op, left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondExpr:
      if (Truthy(Eval(*e.a))) return Eval(*e.b);
      if (e.c) return Eval(*e.c);
      return Value::Undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was "
          "defined.",
          e.pos.line));
  }
  ThrowRender("bad expression");
}

void Evaluator::EvalArgs(const ArgList& a, CallArgs* out) {
  for (auto& x : a.pos) out->pos.push_back(Eval(*x));
  if (a.star) {
    for (Value& v : Iterate(Eval(*a.star))) out->pos.push_back(std::move(v));
  }
  for (auto& [k, x] : a.kw) out->kw.emplace_back(k, Eval(*x));
  if (a.star_star) {
    Value d = Eval(*a.star_star);
    if (!d.is_mapping()) ThrowRender("argument after ** must be a mapping");
    for (auto& [k, v] : d.dict().items) out->kw.emplace_back(ToStr(k), v);
  }
}

Value Evaluator::EvalCall(const Expr& e) {
  Value fn = Eval(*e.a);
  CallArgs args;
  EvalArgs(e.args, &args);
  return Call(fn, args);
}

Value Evaluator::Call(const Value& fn, CallArgs& args) {
  if (fn.kind() != Kind::kCallable) {
    if (fn.is_undefined()) FailUndefined(fn);
    ThrowRender(fmt::format("'{}' object is not callable", TypeName(fn)));
  }
  Tick();
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    ThrowRender("maximum recursion depth exceeded in macro/function calls");
  }
  struct Dec {
    int& d;
    ~Dec() { --d; }
  } dec{call_depth_};
  return fn.callable().Call(*this, args);
}

Value Evaluator::EvalFilter(const Expr& e, const Value* hole) {
  // In {% filter %} and {% set x | f %} the innermost filter's operand is the rendered body.
  Value v = !e.a                             ? (hole ? *hole : Value())
            : e.a->kind == ExprKind::kFilter ? EvalFilter(*e.a, hole)
                                             : Eval(*e.a);
  CallArgs args;
  EvalArgs(e.args, &args);
  try {
    return ApplyFilter(e.name, v, args);
  } catch (RenderError& err) {
    if (err.line == 0) err.line = e.pos.line, err.col = e.pos.col;
    throw;
  }
}

Value Evaluator::ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  FilterFn f = FindFilter(name);
  if (!f) ThrowRender(fmt::format("No filter named '{}'.", name));
  Tick();
  return f(*this, v, args);
}

bool Evaluator::ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
  TestFn t = FindTest(name);
  if (!t) ThrowRender(fmt::format("No test named '{}'.", name));
  return t(*this, v, args);
}

Value Evaluator::GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      FailUndefined(obj);
    case Kind::kDict: {
      Value m = FindMethod(obj, name);
      if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
      if (const Value* v = obj.dict().Find(std::string_view(name))) return *v;
      break;
    }
    case Kind::kNamespace:
      if (const Value* v = obj.dict().Find(std::string_view(name))) return *v;
      break;
    case Kind::kString:
    case Kind::kList:
    case Kind::kTuple: {
      Value m = FindMethod(obj, name);
      if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
      break;
    }
    default:
      break;
  }
  return Value::Undefined(fmt::format("'{}' has no attribute '{}'", ObjectTypeRepr(obj), name));
}

Value Evaluator::GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      FailUndefined(obj);
    case Kind::kDict:
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Kind::kString:
    case Kind::kList:
    case Kind::kTuple:
      if (key.kind() == Kind::kInt || key.kind() == Kind::kBool) {
        Value out;
        if (IndexSequence(obj, key.int_value(), &out)) return out;
        return Value::Undefined(
            fmt::format("{} has no element {}", ObjectTypeRepr(obj), Repr(key)));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(fmt::format("{} has no element {}", ObjectTypeRepr(obj), Repr(key)));
}

Value Evaluator::MakeMacro(const std::shared_ptr<MacroDef>& def, Value caller) {
  auto m = std::make_shared<MacroState>();
  m->def = def;
  m->closure = frame_;
  if (closure_frames_.empty() || closure_frames_.back() != frame_)
    closure_frames_.push_back(frame_);
  m->caller = std::move(caller);
  return Value::MakeCallable(m);
}

Value Evaluator::CallMacro(const MacroState& m, CallArgs& args) {
  const MacroDef& def = *m.def;
  auto frame = Child(m.closure, def.shadow);
  const size_t np = def.params.size();
  std::vector<bool> given(np, false);
  List varargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < np) {
      frame->vars[def.params[i]] = args.pos[i];
      given[i] = true;
    } else if (def.uses_varargs) {
      varargs.push_back(args.pos[i]);
    } else {
      ThrowRender(fmt::format("macro '{}' takes not more than {} argument(s)", def.name, np));
    }
  }
  Value kwargs = Value::MakeDict();
  for (auto& [k, v] : args.kw) {
    size_t idx = np;
    for (size_t i = 0; i < np; ++i)
      if (def.params[i] == k) idx = i;
    if (idx < np) {
      if (given[idx])
        ThrowRender(fmt::format("macro '{}' got multiple values for argument '{}'", def.name, k));
      frame->vars[k] = v;
      given[idx] = true;
    } else if (k == "caller") {
      if (def.uses_caller) frame->vars["caller"] = v;
    } else if (def.uses_kwargs) {
      kwargs.dict().Set(Value(k), v);
    } else {
      ThrowRender(fmt::format("macro '{}' takes no keyword argument '{}'", def.name, k));
    }
  }
  FrameSwap swap(frame_, frame);
  const size_t first_default = np - def.defaults.size();
  for (size_t i = 0; i < np; ++i) {
    if (given[i]) continue;
    if (i >= first_default) {
      frame->vars[def.params[i]] = Eval(*def.defaults[i - first_default]);
    } else {
      frame->vars[def.params[i]] =
          Value::Undefined(fmt::format("parameter '{}' was not provided", def.params[i]));
    }
  }
  if (def.uses_varargs) frame->vars["varargs"] = Value::MakeTuple(std::move(varargs));
  if (def.uses_kwargs) frame->vars["kwargs"] = kwargs;
  if (def.uses_caller && !frame->vars.count("caller"))
    frame->vars["caller"] = Value::Undefined("No caller defined");
  return Value(Capture(def.body));
}

}  // namespace tq::jinja
