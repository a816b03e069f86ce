// Jinja2 parser: tokens -> statement tree, following jinja2.parser's grammar and precedence:
// condexpr < or < and < not < compare (in, not in, ==, <...) < + - < ~ < * / // % < ** <
// unary - + < postfix (. [] ()) < filters | and tests `is`.
#pragma once

#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace tq::jinja {

// Throws RenderError with line/col on syntax errors, unknown tags, unknown filters and tests,
// and nesting deeper than kMaxParseDepth.
Body Parse(std::vector<Token> tokens);

constexpr int kMaxParseDepth = 96;

}  // namespace tq::jinja
