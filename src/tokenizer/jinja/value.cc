#include "tokenizer/jinja/value.h"

#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/jinja/text.h"

namespace tq::jinja {

void ThrowRender(std::string message) { throw RenderError{std::move(message)}; }

Value::Value(std::string s)
    : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::Undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

namespace {

int NestingOf(const List& items) {
  int d = 0;
  for (const Value& x : items) d = std::max(d, x.depth());
  if (d + 1 > kMaxNesting)
    ThrowRender(fmt::format("data nested deeper than {} levels", kMaxNesting));
  return d + 1;
}

}  // namespace

Value Value::MakeList(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.i_ = NestingOf(items);
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

int Value::depth() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kGenerator:
    case Kind::kCallable:
      return static_cast<int>(i_);
    case Kind::kDict:
    case Kind::kNamespace:
      return dict_->depth;
    default:
      return 0;
  }
}

Value Value::MakeTuple(List items) {
  Value v = MakeList(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::MakeGenerator(List items) {
  Value v = MakeList(std::move(items));
  v.kind_ = Kind::kGenerator;
  return v;
}

Value Value::MakeDict() {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::MakeNamespace() {
  Value v = MakeDict();
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::MakeCallable(std::shared_ptr<Callable> fn, int depth) {
  if (depth > kMaxNesting)
    ThrowRender(fmt::format("data nested deeper than {} levels", kMaxNesting));
  Value v;
  v.kind_ = Kind::kCallable;
  v.i_ = depth;
  v.fn_ = std::move(fn);
  return v;
}

namespace {

class NativeCallable : public Callable {
 public:
  NativeCallable(std::string name, NativeFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  Value Call(Evaluator& ev, CallArgs& args) override { return fn_(ev, args); }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  NativeFn fn_;
};

}  // namespace

Value MakeFunction(std::string name, NativeFn fn, int depth) {
  return Value::MakeCallable(std::make_shared<NativeCallable>(std::move(name), std::move(fn)),
                             depth);
}

namespace {

Value FromJsonAt(const nlohmann::ordered_json& j, int level);

}  // namespace

Value Value::FromJson(const nlohmann::ordered_json& j) { return FromJsonAt(j, 0); }

namespace {

Value FromJsonAt(const nlohmann::ordered_json& j, int level) {
  if (level >= kMaxNesting)
    ThrowRender(fmt::format("JSON nested deeper than {} levels", kMaxNesting));
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
      return Value::None();
    case T::boolean:
      return Value(j.get<bool>());
    case T::number_integer:
      return Value(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case T::number_float:
      return Value(j.get<double>());
    case T::string:
      return Value(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonAt(e, level + 1));
      return Value::MakeList(std::move(items));
    }
    case T::object: {
      Value d = Value::MakeDict();
      d.dict().items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dict().Add(Value(it.key()), FromJsonAt(it.value(), level + 1));
      return d;
    }
    default:
      return Value::None();
  }
}

}  // namespace

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return s_ ? *s_ : kEmpty;
}

const void* Value::identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  if (fn_) return fn_.get();
  if (s_) return s_.get();
  return nullptr;
}

Value* Dict::Find(const Value& key) {
  if (key.is_string()) return Find(std::string_view(key.str()));
  for (auto& [k, v] : items)
    if (Equals(k, key)) return &v;
  return nullptr;
}

Value* Dict::Find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  if (Value* v = Find(key)) {
    const int d = value.depth() + 1;
    if (d > kMaxNesting) ThrowRender(fmt::format("data nested deeper than {} levels", kMaxNesting));
    depth = std::max(depth, d);
    *v = std::move(value);
    return;
  }
  Add(std::move(key), std::move(value));
}

void Dict::Add(Value key, Value value) {
  const int d = std::max(key.depth(), value.depth()) + 1;
  if (d > kMaxNesting) ThrowRender(fmt::format("data nested deeper than {} levels", kMaxNesting));
  depth = std::max(depth, d);
  items.emplace_back(std::move(key), std::move(value));
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kGenerator:
      return "generator";
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return TypeName(v) + " object";
}

void FailUndefined(const Value& v) {
  ThrowRender(v.undefined_hint().empty() ? "undefined value" : v.undefined_hint());
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return v.int_value() != 0;
    case Kind::kFloat:
      return v.float_value() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !v.list().empty();
    case Kind::kDict:
      return !v.dict().items.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kGenerator:
      return true;
  }
  return false;
}

namespace {

bool IsIntLike(const Value& v) { return v.kind() == Kind::kInt || v.kind() == Kind::kBool; }

}  // namespace

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (IsIntLike(a) && IsIntLike(b)) return a.int_value() == b.int_value();
    return a.float_value() == b.float_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple: {
      const List &x = a.list(), &y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!Equals(x[i], y[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (auto& [k, v] : a.dict().items) {
        const Value* o = b.dict().Find(k);
        if (!o || !Equals(v, *o)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

int CompareValues(const Value& a, const Value& b) {
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  if (a.is_number() && b.is_number()) {
    if (IsIntLike(a) && IsIntLike(b))
      return a.int_value() < b.int_value() ? -1 : (a.int_value() > b.int_value() ? 1 : 0);
    const double x = a.float_value(), y = b.float_value();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order == code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_sequence() && a.kind() == b.kind()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return CompareValues(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  ThrowRender(fmt::format("'<' not supported between instances of '{}' and '{}'", TypeName(a),
                          TypeName(b)));
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return v.str();
    default:
      return Repr(v);
  }
}

namespace {

std::string ReprAt(const Value& v, int depth);

}  // namespace

std::string Repr(const Value& v) { return ReprAt(v, 0); }

namespace {

constexpr int kMaxReprDepth = 200;

std::string ReprAt(const Value& v, int depth) {
  if (depth > kMaxReprDepth) ThrowRender("maximum recursion depth exceeded in repr()");
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.bool_value() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(v.int_value());
    case Kind::kFloat:
      return PyReprFloat(v.float_value());
    case Kind::kString:
      return PyReprString(v.str());
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = v.kind() == Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      const List& items = v.list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += ReprAt(items[i], depth + 1);
      }
      if (tuple && items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = "{";
      bool first = true;
      for (auto& [k, val] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += ReprAt(k, depth + 1) + ": " + ReprAt(val, depth + 1);
      }
      out += "}";
      if (v.kind() == Kind::kNamespace) return "<Namespace " + out + ">";
      return out;
    }
    case Kind::kCallable:
      return "<function " + v.callable().Name() + ">";
    case Kind::kGenerator:
      return "<generator object>";
  }
  return "";
}

}  // namespace

size_t Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return CodePointCount(v.str());
    case Kind::kList:
    case Kind::kTuple:
      return v.list().size();
    case Kind::kDict:
      return v.dict().items.size();
    default:
      ThrowRender(fmt::format("object of type '{}' has no len()", TypeName(v)));
  }
}

List Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kString: {
      List out;
      for (char32_t c : DecodeUtf8(v.str())) {
        std::string s;
        AppendUtf8(s, c);
        out.emplace_back(std::move(s));
      }
      return out;
    }
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kGenerator:
      return v.list();
    case Kind::kDict: {
      List out;
      out.reserve(v.dict().items.size());
      for (auto& kv : v.dict().items) out.push_back(kv.first);
      return out;
    }
    default:
      ThrowRender(fmt::format("'{}' object is not iterable", TypeName(v)));
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string())
        ThrowRender(
            fmt::format("'in <string>' requires string as left operand, not {}", TypeName(item)));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kGenerator:
      for (const Value& e : container.list())
        if (Equals(e, item)) return true;
      return false;
    case Kind::kDict:
      if (item.kind() == Kind::kList || item.kind() == Kind::kDict ||
          item.kind() == Kind::kNamespace)
        ThrowRender(fmt::format("unhashable type: '{}'", TypeName(item)));
      return container.dict().Find(item) != nullptr;
    default:
      ThrowRender(fmt::format("argument of type '{}' is not iterable", TypeName(container)));
  }
}

}  // namespace tq::jinja
