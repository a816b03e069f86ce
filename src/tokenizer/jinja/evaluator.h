// Renders a parsed template: statements write to an output buffer, expressions evaluate to
// Values. Scoping follows Jinja: `for` bodies and macros get their own frame (assignments do not
// leak out), `if` does not; namespaces carry state out of loops.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace tq::jinja {

// Bounds that keep hostile templates from running away.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // also bounds any one string or list built
  int max_call_depth = 96;                     // nested macro calls
  uint64_t max_steps = 20'000'000;             // statements + loop iterations + calls
};

class Evaluator {
 public:
  Evaluator(std::shared_ptr<Dict> globals, const RenderLimits& limits);
  // Breaks the reference cycles a render can build (a macro stored in the frame it closes over,
  // a namespace holding itself) so that nothing leaks.
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders the body; RenderError carries the failing node's position.
  std::string Render(const Body& body);

  // For builtins (filters like map/select, the loop object, macros).
  Value Call(const Value& fn, CallArgs& args);
  Value ApplyFilter(const std::string& name, const Value& v, CallArgs& args);
  bool ApplyTest(const std::string& name, const Value& v, CallArgs& args);
  Value GetAttr(const Value& obj, const std::string& name);  // obj.name
  Value GetItem(const Value& obj, const Value& key);         // obj[key]
  void Tick();
  // Namespaces can be made to contain themselves; they are emptied when the render ends.
  void TrackNamespace(const Value& ns) { namespaces_.push_back(ns); }
  size_t max_size() const { return limits_.max_output_bytes; }

  struct Frame {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Frame> parent;
  };
  struct MacroState;  // a macro and the frame it closes over

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow ExecBody(const Body& body);
  Flow Exec(const Stmt& s);
  void ExecFor(const Stmt& s);
  Value Eval(const Expr& e);
  Value EvalInner(const Expr& e);
  Value EvalCall(const Expr& e);
  Value EvalFilter(const Expr& e, const Value* hole);
  void EvalArgs(const ArgList& a, CallArgs* out);
  Value Lookup(const std::string& name) const;
  void Assign(const Target& t, const Value& v, const Pos& pos);
  void Emit(const std::string& s);
  std::string Capture(const Body& body);
  Value MakeMacro(const std::shared_ptr<MacroDef>& def, Value caller);
  friend struct MacroState;
  Value CallMacro(const MacroState& m, CallArgs& args);

  std::shared_ptr<Dict> globals_;
  RenderLimits limits_;
  std::shared_ptr<Frame> frame_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;
  std::vector<std::shared_ptr<Frame>> closure_frames_;  // frames that macros close over
};

}  // namespace tq::jinja
