// The Jinja value model: Python's objects as templates see them. Lists, dicts and namespaces are
// shared (reference semantics, as in Python); dicts keep insertion order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tq::jinja {

class Value;
class Evaluator;
struct Dict;
using List = std::vector<Value>;

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kDict,
  kNamespace,  // namespace(), also the `loop` object: attribute get/set, not a mapping
  kCallable,
  kGenerator,  // what map/select/... return in Jinja: iterable once, always true, no len()
};

// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value Call(Evaluator& ev, CallArgs& args) = 0;
  virtual std::string Name() const = 0;
};

// Errors raised while evaluating: the evaluator adds the template position.
struct RenderError {
  std::string message;
  int line = 0, col = 0;  // 0 until a node position is attached
};
[[noreturn]] void ThrowRender(std::string message);

class Value {
 public:
  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), i_(b) {}
  Value(int v) : kind_(Kind::kInt), i_(v) {}
  Value(int64_t v) : kind_(Kind::kInt), i_(v) {}
  Value(double v) : kind_(Kind::kFloat), f_(v) {}
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}

  // `hint` is the message raised when the undefined value is used (Jinja's UndefinedError).
  static Value Undefined(std::string hint = "");
  static Value None();
  static Value MakeList(List items = {});
  static Value MakeTuple(List items);
  static Value MakeGenerator(List items);
  static Value MakeDict();
  static Value MakeNamespace();
  static Value MakeCallable(std::shared_ptr<Callable> fn, int depth = 0);
  // ThrowRender when the JSON nests deeper than kMaxNesting.
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_int() const { return kind_ == Kind::kInt; }  // bool excluded
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_mapping() const { return kind_ == Kind::kDict; }

  bool bool_value() const { return i_ != 0; }
  int64_t int_value() const { return i_; }  // int or bool
  double float_value() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  Callable& callable() const { return *fn_; }
  const std::string& undefined_hint() const;
  // Container nesting: 0 for scalars, 1 + the deepest element for lists, dicts, namespaces and
  // bound methods. Bounded by kMaxNesting so that comparisons, printing and destruction never
  // recurse deeply.
  int depth() const;
  const void* identity() const;  // for the `sameas` test

 private:
  Kind kind_ = Kind::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // string, or the undefined hint
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

constexpr int kMaxNesting = 800;

struct Dict {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;  // only grows; see Value::depth()

  Value* Find(const Value& key);
  Value* Find(std::string_view key);
  void Set(Value key, Value value);
  // Appends without looking for an existing key.
  void Add(Value key, Value value);
};

// A native function as a callable value.
using NativeFn = std::function<Value(Evaluator&, CallArgs&)>;
// `depth`: the nesting of what the function holds (a bound method's object).
Value MakeFunction(std::string name, NativeFn fn, int depth = 0);

// Python semantics used throughout.
std::string TypeName(const Value& v);               // 'str', 'int', 'dict', ...
std::string ObjectTypeRepr(const Value& v);         // Jinja's "dict object", "None"
bool Truthy(const Value& v);                        // undefined -> false, raises nothing
bool Equals(const Value& a, const Value& b);        // Python ==
int CompareValues(const Value& a, const Value& b);  // <0/0/>0; ThrowRender on unorderable
std::string ToStr(const Value& v);                  // str(v); undefined -> ""
std::string Repr(const Value& v);                   // repr(v)
// Python len(); ThrowRender for types without a length.
size_t Length(const Value& v);
// Python iter(): list/tuple items, dict keys, string characters; undefined -> empty.
List Iterate(const Value& v);
bool Contains(const Value& container, const Value& item);  // `item in container`
// Raises the UndefinedError of an undefined value.
[[noreturn]] void FailUndefined(const Value& v);
}  // namespace tq::jinja
