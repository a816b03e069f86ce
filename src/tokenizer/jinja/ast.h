// The template syntax tree. Expressions and statements are small structs tagged by kind;
// the evaluator switches on the kind. Every node keeps its source line/column for errors.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace tq::jinja {

struct Pos {
  int line = 0, col = 0;
};

enum class ExprKind : uint8_t {
  kConst,
  kName,
  kList,
  kTuple,
  kDict,
  kGetattr,
  kGetitem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNot,
  kNeg,
  kPos,
  kBinary,
  kAnd,
  kOr,
  kCompare,
  kCondExpr,
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Arguments as written at a call site: f(a, b, k=v, *args, **kwargs).
struct ArgList {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  ExprPtr star;       // *args
  ExprPtr star_star;  // **kwargs
};

struct Expr {
  ExprKind kind;
  Pos pos;
  Value constant;              // kConst
  std::string name;            // kName, kGetattr attribute, kFilter/kTest name
  std::vector<ExprPtr> items;  // kList, kTuple, kDict (key, value, key, value ...)
  ExprPtr a, b, c;             // operands: object/index, slice start/stop/step, cond parts
  ArgList args;                // kCall, kFilter, kTest
  BinOp bin_op = BinOp::kAdd;  // kBinary
  std::vector<std::pair<CmpOp, ExprPtr>> cmp;  // kCompare: a op0 cmp0 op1 cmp1 ...

  Expr(ExprKind k, Pos p) : kind(k), pos(p) {}
};

enum class StmtKind : uint8_t {
  kData,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kScope,  // a body rendered in its own frame ({% generation %}, and the template root)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// An assignment target: a name, a namespace attribute (ns.attr) or a (nested) tuple of names.
struct Target {
  std::string name;  // empty for tuples
  std::string attr;  // namespace attribute, when set
  std::vector<Target> items;
  bool is_tuple = false;
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned to the last params
  Body body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
  std::vector<std::string> shadow;  // see Stmt::shadow
};

struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;  // kData
  ExprPtr expr;      // kOutput, kFor iterable, kSet value, kCallBlock call, kFilterBlock filter
  ExprPtr filter;    // kFor `if` filter, kSetBlock filter
  // kIf: tests[i] guards bodies[i]; a trailing body without a test is the else branch.
  std::vector<ExprPtr> tests;
  std::vector<Body> bodies;
  Target target;  // kFor, kSet, kSetBlock
  Body body, else_body;
  std::shared_ptr<MacroDef> macro;                  // kMacro, kCallBlock (the caller)
  std::vector<std::pair<Target, ExprPtr>> assigns;  // kWith
  // Names that start out undefined in the frame this statement opens (the body of a loop, set or
  // filter block, with, scope): Jinja binds a name assigned in a frame, and not known to any
  // enclosing frame, to that frame from its start, so earlier reads do not see the render
  // variables. else_shadow is the same for a loop's else block.
  std::vector<std::string> shadow, else_shadow;

  Stmt(StmtKind k, Pos p) : kind(k), pos(p) {}
};

}  // namespace tq::jinja
