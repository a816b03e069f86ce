// Python string formatting used by templates: str.format(), the `%` operator (via the `format`
// filter), str.title() and str.capitalize().
#pragma once

#include <string>

#include "tokenizer/jinja/value.h"

namespace tq::jinja {

std::string PyTitle(const std::string& s);
std::string PyCapitalize(const std::string& s);
// "{} {name} {0!r:>8}".format(...): fields, conversions and the common format-spec subset
// ([[fill]align][sign][0][width][,][.precision][type] with type s d f e g x o b %).
std::string PyStrFormat(Evaluator& ev, const std::string& fmt, CallArgs& args);
// "%s and %d" % args (args: a tuple, a single value, or a dict for %(name)s).
std::string PyPercentFormat(const std::string& fmt, const Value& args);

}  // namespace tq::jinja
