// Jinja's built-in filters, tests, methods of Python objects and globals, as Hugging Face's
// chat-template environment provides them (ImmutableSandboxedEnvironment + loopcontrols, with
// its own tojson, raise_exception and strftime_now).
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/jinja/value.h"

namespace tq::jinja {

class Evaluator;

using FilterFn = Value (*)(Evaluator& ev, const Value& v, CallArgs& args);
using TestFn = bool (*)(Evaluator& ev, const Value& v, CallArgs& args);

FilterFn FindFilter(std::string_view name);  // nullptr when unknown
TestFn FindTest(std::string_view name);

// `obj.name` for Python methods of str, dict and list (a bound callable), or an undefined value
// when the object has no such method. Mutating list/dict methods answer an undefined whose use
// raises the sandbox's "unsafe" error, as the immutable sandbox does.
Value FindMethod(const Value& obj, const std::string& name);

// The global functions: range, dict, namespace, joiner, cycler, raise_exception, strftime_now.
void AddGlobals(Dict& globals);

// Binds call arguments to named parameters, Python style. Missing ones are undefined values.
// Throws for too many positional arguments or unknown keywords.
std::vector<Value> BindArgs(CallArgs& args, std::initializer_list<const char*> names,
                            std::string_view fn_name);

}  // namespace tq::jinja
